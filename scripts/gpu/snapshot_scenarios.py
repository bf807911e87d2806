"""Makes real allocator snapshots for ptscope's tests and validation on a CUDA
machine. Usage: OUT=dir python3 scripts/gpu/snapshot_scenarios.py [scenario ...]
Scenarios: validate oom_capacity oom_fragmentation leak expandable big (default: all but big).
Each writes its files to $OUT and logs facts measured in the process to $OUT/facts.jsonl."""
import gc, json, lzma, os, shutil, subprocess, sys, time, traceback
import torch

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
FACTS = open(os.path.join(OUT, "facts.jsonl"), "a")

def fact(**kw):
    kw["torch"] = torch.__version__
    kw["gpu"] = torch.cuda.get_device_name(0)
    FACTS.write(json.dumps(kw) + "\n"); FACTS.flush()
    print(json.dumps(kw), flush=True)

def record(max_entries=200000, stacks="python"):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)

def stop():
    torch.cuda.memory._record_memory_history(enabled=None)

def dump(name, xz=True):
    path = os.path.join("/tmp", name)
    torch.cuda.memory._dump_snapshot(path)
    if xz:
        with open(path, "rb") as f, lzma.open(os.path.join(OUT, name + ".xz"), "wb", preset=9) as g:
            shutil.copyfileobj(f, g)
    return path

def gpt2(n_layer=4, n_embd=512, n_head=8):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=1024, vocab_size=50257))

def step(model, opt, x):
    loss = model(input_ids=x, labels=x).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return loss

def reset():
    stop(); gc.collect(); torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()

def validate():
    """Same run: memory history from before the model exists, and torch.profiler's
    memory timeline, so categories can be compared."""
    from torch.profiler import profile, ProfilerActivity
    record(stacks="python")
    model = gpt2().cuda(); opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (4, 256), device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            step(model, opt, x)
    torch.cuda.synchronize()
    fact(scenario="validate", file="validate_gpt2tiny_fp32.pickle.xz", max_memory_allocated=torch.cuda.max_memory_allocated(),
         max_memory_reserved=torch.cuda.max_memory_reserved(), memory_allocated=torch.cuda.memory_allocated(),
         memory_reserved=torch.cuda.memory_reserved(), note="recorded from before model creation; 3 AdamW fp32 steps, batch 4x256, profiler on the same steps")
    dump("validate_gpt2tiny_fp32.pickle")
    prof.export_memory_timeline(os.path.join(OUT, "validate_gpt2tiny_fp32_timeline_raw.json.gz"), device="cuda:0")
    del model, opt, x, prof
    reset()

def oom_capacity():
    record()
    keep = []
    try:
        while True:
            keep.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as e:
        fact(scenario="oom_capacity", file="oom_capacity.pickle.xz", tensors=len(keep), memory_allocated=torch.cuda.memory_allocated(),
             memory_reserved=torch.cuda.memory_reserved(), error=str(e).splitlines()[0][:300])
    dump("oom_capacity.pickle")
    keep.clear(); reset()

def oom_fragmentation():
    """Every 1 GiB segment keeps a live 600 MiB block and a free 424 MiB tail:
    lots of free memory in total, none of it in one piece of 800 MiB."""
    record()
    live = []
    try:
        while True:
            a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
            del a
            live.append(torch.empty(600 << 20, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    free_dev, total = torch.cuda.mem_get_info()
    try:
        big = torch.empty(800 << 20, dtype=torch.uint8, device="cuda")
        fact(scenario="oom_fragmentation", error="no OOM happened")
    except torch.OutOfMemoryError as e:
        fact(scenario="oom_fragmentation", file="oom_fragmentation.pickle.xz", live_600mib=len(live), device_free=free_dev,
             memory_allocated=torch.cuda.memory_allocated(), memory_reserved=torch.cuda.memory_reserved(), error=str(e).splitlines()[0][:300])
    dump("oom_fragmentation.pickle")
    live.clear(); reset()

def leak():
    record()
    model = gpt2(n_layer=2, n_embd=256, n_head=4).cuda(); opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randint(0, 50257, (2, 128), device="cuda")
    kept = []
    for _ in range(8):
        kept.append(step(model, opt, x).detach() * 1)   # warm-up style
        kept.append(model(input_ids=x, labels=x).loss)    # a loss kept with its graph: the leak
    torch.cuda.synchronize()
    fact(scenario="leak", file="leak_gpt2_2l.pickle.xz", max_memory_allocated=torch.cuda.max_memory_allocated(),
         memory_allocated=torch.cuda.memory_allocated(), note="8 steps, each keeps a forward graph alive")
    dump("leak_gpt2_2l.pickle")
    del model, opt, kept; reset()

def expandable():
    code = r'''
import torch, os
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=100000)
from transformers import GPT2Config, GPT2LMHeadModel
m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=50257)).cuda()
o = torch.optim.AdamW(m.parameters())
x = torch.randint(0, 50257, (2, 128), device="cuda")
for _ in range(2):
    l = m(input_ids=x, labels=x).loss; l.backward(); o.step(); o.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("MAX", torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
torch.cuda.memory._dump_snapshot("/tmp/expandable_gpt2_2l.pickle")
'''
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("MAX")]
    if not line:
        fact(scenario="expandable", error=out.stderr[-500:]); return
    _, mx, al, rs = line[0].split()
    with open("/tmp/expandable_gpt2_2l.pickle", "rb") as f, lzma.open(os.path.join(OUT, "expandable_gpt2_2l.pickle.xz"), "wb", preset=9) as g:
        shutil.copyfileobj(f, g)
    fact(scenario="expandable", file="expandable_gpt2_2l.pickle.xz", max_memory_allocated=int(mx), memory_allocated=int(al), memory_reserved=int(rs))

def big():
    """A 1,000,000-entry snapshot of GPT-2 small training (kept on the machine)."""
    record(max_entries=1000000)
    model = gpt2(12, 768, 12).cuda(); opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (8, 512), device="cuda")
    n = 0
    t = time.time()
    while n < 340 and time.time() - t < 150:
        step(model, opt, x); n += 1
    torch.cuda.synchronize()
    path = dump("big_gpt2s_1m.pickle", xz=False)
    fact(scenario="big", path=path, steps=n, bytes=os.path.getsize(path), max_memory_allocated=torch.cuda.max_memory_allocated())
    del model, opt; reset()

if __name__ == "__main__":
    names = sys.argv[1:] or ["validate", "oom_capacity", "oom_fragmentation", "leak", "expandable"]
    for n in names:
        t = time.time()
        try:
            globals()[n]()
            print(f"== {n} ok in {time.time()-t:.1f}s", flush=True)
        except Exception:
            print(f"== {n} FAILED\n" + traceback.format_exc(), flush=True)
            try:
                reset()
            except Exception:
                pass

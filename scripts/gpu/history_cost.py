"""What the allocator history costs per operation on a CPU-bound loop, by
_record_memory_history option: python3 scripts/gpu/history_cost.py
Prints microseconds per iteration of a small loop (allocating ops, a tiny
MLP forward+backward) for each setting, best of several rounds."""
import inspect, time, torch

dev = "cuda"
torch.manual_seed(0)
x = torch.randn(64, 64, device=dev)
mlp = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).to(dev)
f = torch.cuda.memory._record_memory_history
params = inspect.signature(f).parameters
print("torch", torch.__version__, "params:", list(params))

def ops(n=2000):
    for _ in range(n):
        y = x + 1
        y = y * 2
        del y

def train(n=300):
    for _ in range(n):
        out = mlp(x).sum()
        out.backward()
        mlp.zero_grad(set_to_none=True)

def bench(fn, n):
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(5):
        t = time.perf_counter(); fn(n); torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best

def setting(name, kw):
    if kw is not None:
        f(**kw)
    a, b = bench(ops, 2000), bench(train, 300)
    with torch.autograd.profiler.record_function("ptscope:probe"):
        pass
    f(enabled=None)
    print(f"{name:40s} ops {a:7.2f} us/iter   mlp train {b:8.1f} us/iter", flush=True)

base = dict(enabled="all", context=None, stacks="python", max_entries=100000)
extra = {"clear_history": False} if "clear_history" in params else {}
for rnd in range(2):
    setting("off", None)
    setting("history context=None", dict(base, **extra))
    if "global_record_annotations" in params:
        setting("history context=None +annotations", dict(base, global_record_annotations=True, **extra))
    setting("history context=alloc", dict(base, context="alloc", **extra))
    if "global_record_annotations" in params:
        setting("history context=alloc +annotations", dict(base, context="alloc", global_record_annotations=True, **extra))
    setting("history enabled=state", dict(base, enabled="state", **extra))

t = time.perf_counter()
for _ in range(1000):
    torch.cuda.memory_stats()
print(f"torch.cuda.memory_stats(): {(time.perf_counter()-t)*1e3:.1f} us/call")
t = time.perf_counter()
for _ in range(1000):
    torch.cuda.memory_allocated(); torch.cuda.max_memory_allocated()
print(f"memory_allocated+max_memory_allocated: {(time.perf_counter()-t)*1e3:.1f} us/pair")

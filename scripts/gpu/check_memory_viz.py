#!/usr/bin/env python3
"""Checks ptscope's memory-viz export with PyTorch's own torch.cuda._memory_viz.

  check_memory_viz.py make OUTDIR           record fresh snapshots on the GPU (with
                                            empty_cache, plain and expandable segments)
  check_memory_viz.py compare ORIG EXPORT   EXPORT (ptscope export memory-viz of ORIG,
                                            .json or .pickle) gives the same stats,
                                            trace, memory and segments output as ORIG,
                                            and trace_plot/segment_plot accept it
  check_memory_viz.py window EXPORT         a trimmed export loads and every
                                            _memory_viz function runs on it
  check_memory_viz.py peak FOLDED FACTS     the folded export's total equals torch's
                                            max_memory_allocated (recorded from the start)
  check_memory_viz.py jobs FILE             runs the compare/window/peak lines of FILE in
                                            this one process (one torch import)

Prints PASS/FAIL lines; exits 1 on any FAIL. _memory_viz's command line reads a
pickle, so a JSON export is also written as a pickle and the CLI is run once on
it; the other checks call the same functions in this process (one torch import).
"""
import ast
import json
import os
import pickle
import subprocess
import sys

failed = False


def report(ok, what, detail=""):
    global failed
    failed |= not ok
    print(f"{'PASS' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)


def mv():
    import torch.cuda._memory_viz as m
    return m


def load_export(path):
    """An export as data and as a pickle file: a JSON export is converted (the
    _memory_viz command line reads pickles), a pickle export is used as is."""
    if path.endswith(".pickle"):
        with open(path, "rb") as f:
            return pickle.load(f), path
    with open(path) as f:
        data = json.load(f)
    pk = path + ".pickle"
    with open(pk, "wb") as f:
        pickle.dump(data, f)
    return data, pk


def norm_trace(text):
    """_memory_viz.trace prints entries it has no format for as dict reprs, whose
    key order and empty fields differ between writers: compare them as dicts."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                d = ast.literal_eval(line)
                # torch writes compile_context "N/A" when there is none; ptscope reads and
                # writes that as absent (docs/export.md)
                d = {k: v for k, v in d.items() if v not in ("", None) and not (k == "compile_context" and v == "N/A")}
                if isinstance(d.get("frames"), list):  # a frame's key order is not significant either
                    d["frames"] = [sorted(f.items()) if isinstance(f, dict) else f for f in d["frames"]]
                line = repr(sorted(d.items()))
            except (ValueError, SyntaxError):
                pass
        out.append(line)
    return out


def folded_totals(text):
    """flamegraph input lines, summed by stack (line order is not significant)."""
    tot = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        tot[stack] = tot.get(stack, 0) + int(n)
    return tot


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i}: {x!r} != {y!r}"
    return f"{len(a)} lines vs {len(b)}"


def run_cli(action, path, *extra):
    p = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", action, path, *extra],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def compare(orig, export):
    m = mv()
    with open(orig, "rb") as f:
        a = pickle.load(f)
    b, bpk = load_export(export)
    name = os.path.basename(export)
    report("segments" in b and "device_traces" in b, f"{name}: export has segments and device_traces")
    entries = [e for t in b["device_traces"] for e in t]
    report(all(("addr" in e or "device_free" in e) and "action" in e and "size" in e and "frames" in e for e in entries),
           f"{name}: {len(entries)} trace entries with action/addr/size/frames")
    sa, sb = m.segsum(a), m.segsum(b)
    report(sa == sb, f"{name}: stats (segsum) identical", "" if sa == sb else first_diff(sa.splitlines(), sb.splitlines()))
    ta, tb = norm_trace(m.trace(a)), norm_trace(m.trace(b))
    report(ta == tb, f"{name}: trace identical ({len(ta)} lines)", "" if ta == tb else first_diff(ta, tb))
    for fn in ("memory", "segments"):
        fa = folded_totals(getattr(m, fn)(a, format_flamegraph=lambda s: s))
        fb = folded_totals(getattr(m, fn)(b, format_flamegraph=lambda s: s))
        report(fa == fb, f"{name}: {fn} flame graph input identical ({len(fa)} stacks)",
               "" if fa == fb else f"{len(set(fa.items()) ^ set(fb.items()))} stacks differ")
    plots(name, b)
    if export.endswith(".pickle"):
        # the command line itself, once per snapshot (each run imports torch)
        code, out, err = run_cli("stats", bpk)
        report(code == 0 and out.strip() == sb.strip(), f"{name}: python -m torch.cuda._memory_viz stats on the export", err[-300:])


def plots(name, data):
    m = mv()
    for fn in ("trace_plot", "segment_plot"):
        try:
            html = getattr(m, fn)(data)
            report("base64" in html and len(html) > 1000, f"{name}: {fn} ({len(html)} bytes of HTML)")
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            report(False, f"{name}: {fn}", repr(e))


def window(export):
    m = mv()
    name = os.path.basename(export)
    b, bpk = load_export(export)
    n = sum(len(t) for t in b["device_traces"])
    for fn in ("segsum", "trace"):
        try:
            getattr(m, fn)(b)
            report(True, f"{name}: {fn} ({n} entries)")
        except Exception as e:  # noqa: BLE001
            report(False, f"{name}: {fn}", repr(e))
    plots(name, b)


def peak(folded, facts):
    with open(folded) as f:
        total = sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())
    with open(facts) as f:
        want = json.load(f)["max_memory_allocated"]
    report(abs(total - want) <= 0.01 * want, f"{os.path.basename(folded)}: folded total {total} B vs torch max_memory_allocated {want} B",
           f"{100 * (total - want) / want:+.3f}%")


def make(outdir):
    """Two small training runs recorded from the start (so the replay sees every
    allocation), with empty_cache between steps so that the trace holds
    segment_free (and, with expandable segments, segment_unmap) entries."""
    os.makedirs(outdir, exist_ok=True)
    for name, conf in (("fresh_plain", ""), ("fresh_expandable", "expandable_segments:True")):
        script = f"""
import json, torch
torch.cuda.memory._record_memory_history(max_entries=100000)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters())
for step in range(4):
    x = torch.randn(256 + 64 * step, 1024, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del x, loss
    torch.cuda.empty_cache()
torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot("{outdir}/{name}.pickle")
json.dump({{"max_memory_allocated": torch.cuda.max_memory_allocated(),
           "memory_allocated": torch.cuda.memory_allocated()}}, open("{outdir}/{name}.facts.json", "w"))
"""
        env = dict(os.environ)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        report(p.returncode == 0, f"recorded {name}.pickle", p.stderr[-500:])


COMMANDS = {"make": make, "compare": compare, "window": window, "peak": peak}


def jobs(path):
    with open(path) as f:
        for line in f:
            if line.strip():
                cmd, *args = line.split()
                COMMANDS[cmd](*args)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    dict(COMMANDS, jobs=jobs)[cmd](*args)
    sys.exit(1 if failed else 0)

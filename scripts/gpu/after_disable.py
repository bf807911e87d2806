#!/usr/bin/env python3
"""Does a process pay for the allocator history after disabling it? The
default capture enables it only inside stack windows; this times small
allocations and a CPU-bound training step (a small MLP, many small
tensors) in one process: before the history was ever enabled, with it
enabled (context "alloc"), and after it was disabled again, alternating
blocks so that host noise hits "enabled" and "after" alike ("never" can only
come first). INFO lines; the --loop mode is the cross-process comparison.
With --loop N it only runs N plain steps and prints their median (ms), for
timing the same loop with and without `ptscope run`.
Usage: python3 scripts/gpu/after_disable.py [--loop N]"""
import statistics
import sys
import time

import torch


def main():
    torch.cuda.init()
    f = torch.cuda.memory._record_memory_history
    kw = dict(enabled="all", context="alloc", stacks="python", max_entries=100000, global_record_annotations=True)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(256, 256) for _ in range(24)]
    model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.GELU())]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 256, device="cuda")

    def step():
        with torch.autograd.profiler.record_function("ptscope:step#0"):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    def allocs(n=2000):
        for _ in range(n):
            t = torch.empty(1024, device="cuda")
            del t

    def block(n=40):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        allocs()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        return (t1 - t0) / 2000 * 1e6, (t2 - t1) / n * 1e3

    for _ in range(20):
        step()
    if "--loop" in sys.argv:
        n = int(sys.argv[sys.argv.index("--loop") + 1])
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
        print("loop median %.4f ms" % statistics.median(times))
        return
    res = {"never": [], "enabled": [], "after": []}
    for _ in range(3):
        res["never"].append(block())
    for cycle in range(8):
        f(**kw)
        res["enabled"].append(block())
        torch.cuda.memory._snapshot()
        f(enabled=None)
        res["after"].append(block())
    # "never" cannot come back once enabled: also compare the first cycles
    out = {}
    for k, v in res.items():
        out[k] = (statistics.median(a for a, _ in v), statistics.median(s for _, s in v))
        print("INFO %-8s alloc+free %.2f us, step %.3f ms (%d blocks)" % (k, out[k][0], out[k][1], len(v)))
    # "never" can only come first, so drift over the run (clocks, caches)
    # lands on it alone: an INFO line; the --loop mode under ptscope run
    # against plain python answers the question across processes
    d = out["after"][1] / out["never"][1] - 1
    print("INFO after_disable: step %+.1f%% after disabling vs never enabled (first blocks); enabled %+.1f%%"
          % (100 * d, 100 * (out["enabled"][1] / out["never"][1] - 1)))


if __name__ == "__main__":
    main()

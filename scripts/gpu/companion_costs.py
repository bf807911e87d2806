#!/usr/bin/env python3
"""Per-call cost (us) of what the companion asks of torch at every step
boundary and phase: allocator statistics (three ways), record_function
ranges, the memory-metadata setter, and a Python-level no-op for scale.
INFO lines only. Usage: python3 scripts/gpu/companion_costs.py"""
import time

import torch


def per_call(fn, n=5000):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def main():
    torch.cuda.init()
    x = [torch.empty(1 << 20, device="cuda") for _ in range(64)]  # some pools in use
    costs = {
        "noop": lambda: None,
        "_cuda_memoryStats": lambda: torch._C._cuda_memoryStats(0),
        "memory_stats": lambda: torch.cuda.memory_stats(0),
        "memory_allocated": lambda: torch.cuda.memory_allocated(0),
        "max_memory_allocated": lambda: torch.cuda.max_memory_allocated(0),
        "mem_get_info": lambda: torch.cuda.mem_get_info(0),
    }
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "memory_allocated"):
        costs["accelerator.memory_allocated"] = lambda: acc.memory_allocated(0)
    gds = getattr(torch._C, "_accelerator_getDeviceStats", None)
    if gds is not None:
        costs["_accelerator_getDeviceStats"] = lambda: gds(0)
    setm = getattr(torch._C, "_cuda_setMemoryMetadata", None) or getattr(torch.cuda.memory, "_set_memory_metadata", None)
    if setm is not None:
        costs["set_memory_metadata"] = lambda: setm("a.b.c")

    def rf():
        with torch.autograd.profiler.record_function("ptscope:forward"):
            pass
    costs["record_function"] = rf
    for k, fn in costs.items():
        try:
            print("INFO cost %-32s %8.2f us" % (k, per_call(fn)))
        except Exception as err:
            print("INFO cost %-32s failed %r" % (k, err))
    s = torch._C._cuda_memoryStats(0)
    print("INFO _cuda_memoryStats keys: %d top, %d leaves" % (len(s), sum(len(v) if isinstance(v, dict) else 1 for v in s.values())))
    if gds is not None:
        d = gds(0)
        print("INFO _accelerator_getDeviceStats: %s" % (sorted(d.keys())[:20] if isinstance(d, dict) else type(d)))
    del x


if __name__ == "__main__":
    main()

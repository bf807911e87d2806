#!/usr/bin/env python3
"""What the default capture's history windows rely on in real PyTorch
(issue 15), checked on the GPU: PASS/FAIL lines and the costs (us).

A window enables the allocator history (context "alloc", Python stacks,
global annotations), is saved with torch.cuda.memory._snapshot(), and the
history is then disabled (enabled=None). Checked:
  ring        the window's snapshot holds its trace and its ranges
  disabled    a snapshot after disabling holds no trace entries
  frames      a block allocated inside the window keeps its stack in later
              snapshots; a block allocated after disabling has none
  reenable    enabling again records only the new window (the ring and the
              annotations start empty)
  rf_cost     a record_function range after disabling costs what it cost
              before the history was ever enabled (the annotation callback
              is gone)
Usage: python3 scripts/gpu/windows_check.py"""
import pickle
import time

import torch

MiB = 1 << 20
fails = 0


def check(name, ok, detail):
    global fails
    fails += 0 if ok else 1
    print("%s windows %s: %s" % ("PASS" if ok else "FAIL", name, detail))


def entries(s):
    return sum(len(t) for t in s.get("device_traces", []))


def anns(s):
    return sorted({a.get("name") for a in s.get("external_annotations", []) if a.get("stage") == "START"})


def frames_of(s, size):
    for seg in s["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["size"] == size:
                return len(b.get("frames") or [])
    return None


def rf_cost(n=20000):
    t = time.perf_counter()
    for _ in range(n):
        with torch.autograd.profiler.record_function("x"):
            pass
    return (time.perf_counter() - t) / n * 1e6


def alloc(label, nbytes):
    with torch.autograd.profiler.record_function(label):
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def main():
    torch.cuda.init()
    f = torch.cuda.memory._record_memory_history
    kw = dict(enabled="all", context="alloc", stacks="python", max_entries=100000, global_record_annotations=True)
    base_rf = rf_cost()
    t = time.perf_counter()
    f(**kw)
    on_us = (time.perf_counter() - t) * 1e6
    inside = alloc("win1", 3 * MiB)
    tmp = alloc("win1_tmp", 5 * MiB)
    del tmp
    t = time.perf_counter()
    s1 = torch.cuda.memory._snapshot()
    data = pickle.dumps(s1, protocol=4)
    save_us = (time.perf_counter() - t) * 1e6
    t = time.perf_counter()
    f(enabled=None)
    off_us = (time.perf_counter() - t) * 1e6
    check("ring", entries(s1) >= 3 and "win1" in anns(s1), "%d entries, ranges %s" % (entries(s1), anns(s1)))
    outside = alloc("gap", 7 * MiB)
    after_rf = rf_cost()
    s2 = torch.cuda.memory._snapshot()
    check("disabled", entries(s2) == 0 and not anns(s2), "%d entries, ranges %s after disabling" % (entries(s2), anns(s2)))
    fi, fo = frames_of(s2, 3 * MiB), frames_of(s2, 7 * MiB)
    check("frames", bool(fi) and not fo, "window block %s frames, block after disabling %s frames" % (fi, fo))
    f(**kw)
    later = alloc("win2", 11 * MiB)
    s3 = torch.cuda.memory._snapshot()
    f(enabled=None)
    sizes = sorted({e["size"] for t in s3["device_traces"] for e in t if e["action"] == "alloc"})
    check("reenable", anns(s3) == ["win2"] and sizes == [11 * MiB],
          "ranges %s, allocation sizes %s" % (anns(s3), sizes))
    check("rf_cost", after_rf < 1.5 * base_rf + 1.0, "record_function %.2f us before any history, %.2f us after disabling"
          % (base_rf, after_rf))
    print("INFO windows costs: enable %.0f us, disable %.0f us, snapshot+pickle of a %d-entry window %.0f us (%d bytes)"
          % (on_us, off_us, entries(s1), save_us, len(data)))
    del inside, outside, later
    print("summary windows_check fail=%d" % fails)
    raise SystemExit(1 if fails else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Pairs the interleaved runs of scripts/gpu/overhead.sh and pools them.

Each repeat of overhead.sh runs every capture option once, back to back, so
repeat k of "default" and repeat k of "off" saw the same host state; the
ratio of their median step times is one pair. A run's median of medians
moves with the host between repeats; the pairs' ratios are the steadier
estimate, and pooling the pairs of several runs narrows it.

Usage: scripts/overhead_pool.py [--goal PCT] RES [RES...]
  RES: a res.tgz that overhead.sh wrote to $OUT, or its res/ folder
       (files WORKLOAD_CAPTURE_REP.json with step_times_ms, step_cpu_ms)
Prints, per RES and pooled over all, for every workload and capture
against off: the number of pairs, the median of the ratios, their mean and
range, and the median ratio of main-thread CPU per step. With --goal, a
PASS or FAIL line per workload for "default" (the pooled pairs' median
within PCT percent of off) and exit status 1 on a FAIL. Standard library
only (runs without torch)."""
import io
import json
import os
import statistics as st
import sys
import tarfile


def load(path):
    """{(workload, capture, rep): run} from a res.tgz or a folder."""
    out = {}

    def add(name, data):
        base = os.path.basename(name)
        if not base.endswith(".json"):
            return
        try:
            w, rest = base[:-5].split("_", 1)
            c, rep = rest.rsplit("_", 1)
            out[(w, c, int(rep))] = json.loads(data)
        except ValueError:
            pass  # not a run, or a torn file

    if os.path.isdir(path):
        for f in sorted(os.listdir(path)):
            with open(os.path.join(path, f), "rb") as fh:
                add(f, fh.read())
    else:
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if m.isfile():
                    add(m.name, tf.extractfile(m).read())
    return out


def pairs(runs):
    """{(workload, capture): [(ratio of median steps, ratio of CPU/step or None)]}."""
    out = {}
    for (w, c, rep), d in sorted(runs.items()):
        off = runs.get((w, "off", rep))
        if c == "off" or off is None or not d.get("step_times_ms") or not off.get("step_times_ms"):
            continue
        r = st.median(d["step_times_ms"]) / st.median(off["step_times_ms"])
        cpu = None
        if d.get("step_cpu_ms") and off.get("step_cpu_ms"):
            cpu = st.median(d["step_cpu_ms"]) / st.median(off["step_cpu_ms"])
        out.setdefault((w, c), []).append((r, cpu))
    return out


def show(label, ps):
    for (w, c), xs in sorted(ps.items()):
        rs = [r for r, _ in xs]
        cpus = [x for _, x in xs if x is not None]
        cpu = "%+.1f%%" % (100 * (st.median(cpus) - 1)) if cpus else "-"
        print("%-12s %-4s %-10s pairs %3d  median %+6.1f%%  mean %+6.1f%%  range %+.1f%% .. %+.1f%%  CPU/step %s"
              % (label, w, c, len(rs), 100 * (st.median(rs) - 1), 100 * (st.mean(rs) - 1),
                 100 * (min(rs) - 1), 100 * (max(rs) - 1), cpu))


def main():
    args, goal = sys.argv[1:], None
    if args[:1] == ["--goal"] and len(args) > 1:
        goal, args = float(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    pooled = {}
    for path in args:
        ps = pairs(load(path))
        show(os.path.basename(path.rstrip("/")), ps)
        for k, v in ps.items():
            pooled.setdefault(k, []).extend(v)
    if len(args) > 1:
        show("pooled", pooled)
    if goal is not None:
        ok = True
        for (w, c), xs in sorted(pooled.items()):
            if c != "default":
                continue
            d = 100 * (st.median(r for r, _ in xs) - 1)
            ok = ok and d <= goal
            print("%s %s: default capture %+.1f%% median step time, median of %d interleaved pairs (goal <= %g%%)"
                  % ("PASS" if d <= goal else "FAIL", w, d, len(xs), goal))
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compare ptscope's "as HTA" numbers with HTA's own on the same traces.

Usage: hta_compare.py HTA.json PTSCOPE.json

HTA.json is hta_numbers.py's output, PTSCOPE.json `ptscope trace --json`'s
for the same folder. Prints one line per rank and number, and exits 1 when
a time differs by more than 2% or a ratio by more than 0.5 points (the
bound of issue 29).
"""
import json
import sys


def main():
    hta = json.load(open(sys.argv[1]))["ranks"]
    pt = {r["rank"]: r["hta"] for r in json.load(open(sys.argv[2]))["ranks"]}
    bad = 0
    worst_t, worst_r = 0.0, 0.0
    for rank in sorted(hta, key=int):
        h, p = hta[rank], pt[int(rank)]
        t = h["temporal"]
        rows = [
            ("kernel time us", t["kernel_time(us)"], p["kernel_time_ns"] / 1e3, "t"),
            ("idle us", t["idle_time(us)"], p["idle_ns"] / 1e3, "t"),
            ("compute us", t["compute_time(us)"], p["compute_ns"] / 1e3, "t"),
            ("non-compute us", t["non_compute_time(us)"], p["non_compute_ns"] / 1e3, "t"),
            ("idle %", t["idle_time_pctg"], 100 * p["idle_ratio"], "r"),
            ("compute %", t["compute_time_pctg"], 100 * p["compute_ratio"], "r"),
            ("non-compute %", t["non_compute_time_pctg"], 100 * p["non_compute_ratio"], "r"),
            # HTA divides by zero without communication (null); ptscope says 0
            ("overlap %", nan0(h.get("comp_comm_overlap_pctg", 0.0)), 100 * p["comm_comp_overlap_ratio"], "r"),
        ]
        cats = {"host_wait": "host_wait_ns", "kernel_wait": "kernel_wait_ns", "other": "other_wait_ns"}
        streams = {s["stream"]: s for s in p["streams"]}
        for sid, v in sorted(h.get("idle_by_stream", {}).items(), key=lambda kv: int(kv[0])):
            s = streams.get(int(sid), {})
            for c, k in cats.items():
                rows.append(("stream %s %s us" % (sid, c), v.get(c, 0.0), s.get(k, 0) / 1e3, "t"))
        for name, want, got, kind in rows:
            if kind == "t":
                d = abs(got - want) / abs(want) if want else abs(got - want)
                ok = d <= 0.02 or abs(got - want) < 1  # under a microsecond: rounding
                worst_t = max(worst_t, d if abs(got - want) >= 1 else 0)
                note = "%.3f%%" % (100 * d)
            else:
                d = abs(got - want)
                ok = d <= 0.5
                worst_r = max(worst_r, d)
                note = "%.3f points" % d
            print("%s rank %s %-28s HTA %14.3f ptscope %14.3f  %s" % ("ok  " if ok else "FAIL", rank, name, want, got, note))
            bad += not ok
    print("worst: %.4f%% on times, %.4f points on percentages" % (100 * worst_t, worst_r))
    sys.exit(1 if bad else 0)


def nan0(x):
    return 0.0 if x is None or x != x else x


if __name__ == "__main__":
    main()

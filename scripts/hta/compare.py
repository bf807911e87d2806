#!/usr/bin/env python3
"""Compare ptscope's deeper analyses with HTA's own results on one trace.

Usage: compare.py HTA.json PTSCOPE.json [--markdown]

HTA.json is analyses.py's output for the trace, PTSCOPE.json
`ptscope trace --json` of the same trace (one rank; with --kernel-sequences-op
NAME when analyses.py ran with --seq-op NAME). Prints one line per compared
number (a Markdown table with --markdown) and exits 1 when one differs by
more than its tolerance: 5% for a critical path's length (issue 29), 1% for
other times and statistics (HTA's are rounded: idle interval statistics to
0.01 us), exact for counts.
"""
import json
import sys


def main():
    hta = json.load(open(sys.argv[1]))
    pt = json.load(open(sys.argv[2]))["ranks"][0]
    md = "--markdown" in sys.argv[3:]
    rows = []

    def cmp(what, want, got, tol, unit=""):
        if want is None:
            return
        if tol == 0:
            ok = abs(got - want) < 1e-9
            note = "exact" if ok else "off by %g" % (got - want)
        else:
            d = abs(got - want) / abs(want) if want else abs(got - want)
            ok = d <= tol or abs(got - want) < 0.011  # HTA rounds some values to 0.01
            note = "%.3f%%" % (100 * d)
        rows.append((what, want, got, unit, note, ok))

    # critical path per step
    steps = {s["step"]: s for s in pt["critical_path"]["steps"]}
    for h in hta.get("critical_path", []):
        if not isinstance(h, dict) or "length_us" not in h:
            continue
        p = steps.get(h["step"]) or (list(steps.values())[0] if len(steps) == 1 else None)
        if p is None:
            continue
        cmp("critical path %s length" % h["step"], h["length_us"], p["length_ns"] / 1e3, 0.05, "us")
        names = {"cpu_bound": "cpu_bound_ns", "gpu_compute_bound": "gpu_compute_bound_ns",
                 "gpu_communication_bound": "gpu_communication_bound_ns",
                 "gpu_kernel_kernel_overhead": "gpu_kernel_kernel_overhead_ns",
                 "gpu_kernel_launch_overhead": "gpu_kernel_launch_overhead_ns"}
        for k, v in h["bound_by_us"].items():
            if k in names:
                got = p["bound_by"][names[k]] / 1e3
                if k == "cpu_bound":
                    got += p["bound_by"]["data_loading_ns"] / 1e3
                cmp("  %s %s" % (h["step"], k), v, got, 0.05, "us")
    # launch statistics
    lh, lp = hta.get("launch"), pt["launch"]["hta"]
    if isinstance(lh, dict) and "rows" in lh:
        cmp("launches", lh["rows"], lp["launches"], 0)
        cmp("launch calls' time", lh["cpu_duration_sum_us"], lp["cpu_ns"] / 1e3, 0.01, "us")
        cmp("launched GPU time", lh["gpu_duration_sum_us"], lp["gpu_ns"] / 1e3, 0.01, "us")
        cmp("short kernels", lh["short_kernels"], lp["short_kernels"], 0)
        cmp("runtime outliers (> 50 us)", lh["runtime_outliers"], lp["runtime_outliers"], 0)
        cmp("launch delay outliers (> 100 us)", lh["launch_delay_outliers"], lp["delay_outliers"], 0)
        dur_stats("launch delay", lh["launch_delay"], lp["delay"], cmp)
    # queue length
    qh = hta.get("queue", {})
    streams = {str(s["stream"]): s for s in pt["streams"]}
    for sid, h in sorted(qh.get("streams", {}).items()):
        p = streams.get(sid)
        if p is None:
            rows.append(("queue stream %s" % sid, h["count"], 0, "", "missing", False))
            continue
        val_stats("queue length stream %s" % sid, h, p["queue"]["samples"], cmp, 1)
    for b in qh.get("blocked", []):
        p = streams.get(str(b["stream"]))
        cmp("time at a full queue stream %s" % b["stream"], b["duration_us"], p["queue"]["full_ns"] / 1e3, 0.01, "us")
    # memory bandwidth
    bws = {b["kind"]: b for b in pt["copy_bandwidth"]}
    for kind, h in sorted(hta.get("memory_bw", {}).items()):
        p = bws.get(kind)
        if p is None:
            rows.append(("bandwidth %s" % kind, h["count"], 0, "", "missing", False))
            continue
        val_stats("bandwidth %s (GB/s)" % kind, h, p["samples_bytes_per_s"], cmp, 1e-9)
    # GPU annotations
    annos = {a["name"]: a for a in pt["gpu_annotations"]}
    for h in hta.get("gpu_annotations", []) if isinstance(hta.get("gpu_annotations"), list) else []:
        p = annos.get(h["name"])
        if p is None:
            rows.append(("gpu annotation %s" % h["name"], h["sum_us"], 0, "us", "missing", False))
            continue
        cmp("gpu annotation %s total" % h["name"], h["sum_us"], p["durations"]["sum_ns"] / 1e3, 0.01, "us")
        cmp("gpu annotation %s max" % h["name"], h["max_us"], p["durations"]["max_ns"] / 1e3, 0.01, "us")
    # idle intervals
    cats = {"host_wait": "host_wait", "kernel_wait": "kernel_wait", "other": "other_wait"}
    for sid, byc in sorted(hta.get("idle_intervals", {}).items()):
        p = streams.get(sid)
        if p is None:
            continue
        for c, h in sorted(byc.items()):
            if h["count"]:
                dur_stats("stream %s %s gaps" % (sid, c), h, p[cats[c]], cmp)
    # kernel sequences
    for op, hs in sorted(hta.get("sequences", {}).items()):
        if not isinstance(hs, list):
            continue
        ps = {(s["operator"] + "|" + "|".join(s["kernels"])): s for s in pt["kernel_sequences"]}
        cmp("kernel sequences of %s" % op, len(hs), len(ps), 0)
        for h in hs[:5]:
            p = ps.get(h["pattern"])
            if p is None:
                rows.append(("  sequence %s..." % h["pattern"][:40], h["count"], 0, "", "missing", False))
                continue
            cmp("  sequence %s... count" % h["pattern"][:40], h["count"], p["count"], 0)
            cmp("  sequence %s... GPU time" % h["pattern"][:40], h["gpu_us"], p["gpu_ns"] / 1e3, 0.01, "us")
    bad = [r for r in rows if not r[5]]
    if md:
        print("| what | HTA | ptscope | agreement |")
        print("|---|---:|---:|---|")
        for what, want, got, unit, note, ok in rows:
            print("| %s | %s %s | %s %s | %s |" % (what.strip(), fmt(want), unit, fmt(got), unit, note if ok else "**" + note + "**"))
    else:
        for what, want, got, unit, note, ok in rows:
            print("%s %-58s HTA %16s ptscope %16s %-3s %s" % ("ok  " if ok else "FAIL", what[:58], fmt(want), fmt(got), unit, note))
    print("%d compared, %d beyond tolerance" % (len(rows), len(bad)))
    sys.exit(1 if bad else 0)


def fmt(x):
    if isinstance(x, float) and not x.is_integer():
        return "%.3f" % x
    return "%d" % x


def dur_stats(what, h, p, cmp):
    """HTA's describe (us) against a DurationStats (ns)."""
    cmp(what + " count", h["count"], p["count"], 0)
    for k, q in (("mean", "mean_ns"), ("min", "min_ns"), ("50%", "p50_ns"), ("max", "max_ns")):
        if h.get(k) is not None:
            cmp("%s %s" % (what, k), h[k], p[q] / 1e3, 0.01, "us")


def val_stats(what, h, p, cmp, scale):
    """HTA's describe against a ValueStats (times scale)."""
    cmp(what + " count", h["count"], p["count"], 0)
    for k, q in (("mean", "mean"), ("min", "min"), ("25%", "p25"), ("50%", "p50"), ("75%", "p75"), ("max", "max")):
        if h.get(k) is not None:
            cmp("%s %s" % (what, k), h[k], p[q] * scale, 0.01)


if __name__ == "__main__":
    main()

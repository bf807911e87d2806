#!/usr/bin/env python3
"""Print Holistic Trace Analysis's own results for one trace, as JSON, for
comparison with ptscope's deeper analyses (docs/validation.md, "HTA's
analyses"; internal/perf/deep_hta_test.go reads the committed outputs).

Usage: analyses.py HTA_SOURCE_DIR TRACE [--seq-op NAME]... [--drop-last-step]

HTA_SOURCE_DIR is a checkout of facebookresearch/HolisticTraceAnalysis (its
hta/ package is imported from there). HTA needs pandas, numpy, networkx,
plotly and pydot: Debian's python3-pandas python3-numpy python3-networkx
python3-plotly python3-pydot (run it with /usr/bin/python3). Nothing else is
needed; HTA's optional modules are not imported by the calls below.

Times are HTA's: microseconds, with HTA_DISABLE_NS_ROUNDING=1 (set here) so
that both tools see the same nanoseconds. The last profiler step is kept
(include_last_profiler_step=True) unless --drop-last-step.

What it runs, each HTA 0.6 API with its defaults unless said:
  critical_path      critical_path_analysis(annotation="ProfilerStep",
                     instance_id=k) for each host ProfilerStep#N (k is its
                     position among the events HTA matches, GPU copies
                     included), or annotation="" (the whole trace) without
                     one; the path's length and its breakdown by bound_by
  launch             get_cuda_kernel_launch_stats(visualize=False)
  queue              get_queue_length_summary, get_time_spent_blocked_on_full_queue(1024)
  memory_bw          get_memory_bw_summary
  gpu_annotations    get_gpu_user_annotation_breakdown(visualize=False,
                     duration_ratio=1, num_kernels=10**9): no "others" row
  idle_intervals     get_idle_time_breakdown(show_idle_interval_stats=True)
  sequences          get_frequent_cuda_kernel_sequences(NAME, top_k=10**9)
                     for each --seq-op NAME
"""
import json
import logging
import math
import os
import sys
import tempfile


def describe(row):
    """A pandas describe() row as a dict (NaN as None)."""
    out = {}
    for k in ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]:
        v = float(row[k])
        out[k] = None if math.isnan(v) else v
    return out


def main():
    args = sys.argv[1:]
    src, trace = args[0], args[1]
    seq_ops = [args[i + 1] for i, a in enumerate(args) if a == "--seq-op"]
    drop_last = "--drop-last-step" in args
    os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
    sys.path.insert(0, src)
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_files={0: trace}, trace_dir=os.path.dirname(trace) or ".",
                       include_last_profiler_step=not drop_last)
    out = {"trace": os.path.basename(trace), "hta_ns_rounding_disabled": True,
           "include_last_profiler_step": not drop_last}
    run(out, "critical_path", lambda: critical_path(ta))
    run(out, "launch", lambda: launch(ta))
    run(out, "queue", lambda: queue(ta))
    run(out, "memory_bw", lambda: memory_bw(ta))
    run(out, "gpu_annotations", lambda: gpu_annotations(ta))
    run(out, "idle_intervals", lambda: idle_intervals(ta))
    out["sequences"] = {}
    for op in seq_ops:
        run(out["sequences"], op, lambda: sequences(ta, op))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


def run(out, key, fn):
    try:
        out[key] = fn()
    except Exception as e:  # record HTA's failure, as HTA users would see it
        out[key] = {"error": "%s: %s" % (type(e).__name__, e)}


def critical_path(ta):
    df = ta.t.get_trace(0)
    sym = ta.t.symbol_table
    table = sym.get_sym_table()
    ids = [v for k, v in sym.get_sym_id_map().items() if "ProfilerStep" in k]
    cats = {sym.get_sym_id_map().get(c, -99) for c in ("user_annotation", "cpu_op")}
    annotations = df[df.name.isin(ids)]
    steps = []
    for pos, (_, row) in enumerate(annotations.iterrows()):
        if row["cat"] in cats:
            steps.append((table[row["name"]], pos))
    results = []
    for name, pos in steps or [("trace", None)]:
        annotation = "ProfilerStep" if pos is not None else ""
        res = ta.critical_path_analysis(rank=0, annotation=annotation, instance_id=pos)
        if res is None:
            results.append({"step": name, "error": "no annotation"})
            continue
        g, ok = res
        r = {"step": name, "ok": bool(ok), "nodes": g.number_of_nodes(), "edges": g.number_of_edges()}
        if ok:
            e = g.get_critical_path_breakdown()
            r["length_us"] = float(e.duration.sum())
            r["bound_by_us"] = {str(k) or "none": float(v) for k, v in e.groupby("bound_by").duration.sum().items()}
        results.append(r)
    return results


def launch(ta):
    df = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    short = df[(df.cpu_duration <= 50) & (df.gpu_duration < df.cpu_duration)]
    return {
        "rows": int(len(df)),
        "cpu_duration_sum_us": float(df.cpu_duration.sum()),
        "gpu_duration_sum_us": float(df.gpu_duration.sum()),
        "launch_delay": describe(df.launch_delay.describe()),
        "short_kernels": int(len(short)),
        "runtime_outliers": int((df.cpu_duration > 50).sum()),
        "launch_delay_outliers": int((df.launch_delay > 100).sum()),
    }


def queue(ta):
    s = ta.get_queue_length_summary(ranks=[0])
    out = {"streams": {}}
    if s is not None:
        for (rank, stream), row in s.iterrows():
            out["streams"][str(int(stream))] = describe(row["queue_length"])
    ql = ta.get_queue_length_time_series(ranks=[0])
    b = ta.get_time_spent_blocked_on_full_queue(ql, max_queue_length=1024)
    out["blocked"] = [] if b is None else [
        {"stream": int(r["stream"]), "duration_us": float(r["duration_at_max_queue_length"])} for _, r in b.iterrows()]
    return out


def memory_bw(ta):
    s = ta.get_memory_bw_summary(ranks=[0])
    out = {}
    if s is not None:
        for (rank, name), row in s.iterrows():
            out[str(name)] = describe(row["memory_bw_gbps"])
    return out


def gpu_annotations(ta):
    df = ta.get_gpu_user_annotation_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10**9)
    if df is None:
        return []
    return [{"name": r["name"], "sum_us": float(r["sum (us)"]), "max_us": float(r["max (us)"]),
             "min_us": float(r["min (us)"]), "mean_us": float(r["mean (us)"])} for _, r in df.iterrows()]


def idle_intervals(ta):
    _, stats = ta.get_idle_time_breakdown(ranks=[0], visualize=False, show_idle_interval_stats=True)
    out = {}
    if stats is not None:
        for cat, row in stats.iterrows():
            out.setdefault(str(int(row["stream"])), {})[str(cat)] = describe(row)
    return out


def sequences(ta, op):
    with tempfile.TemporaryDirectory() as d:
        df = ta.get_frequent_cuda_kernel_sequences(operator_name=op, output_dir=d, top_k=10**9, visualize=False)
    if df is None or len(df) == 0:
        return []
    return [{"pattern": r["pattern"], "count": int(r["count"]), "gpu_us": float(r["GPU kernel duration (us)"]),
             "cpu_us": float(r["CPU op duration (us)"])} for _, r in df.iterrows()]


if __name__ == "__main__":
    main()

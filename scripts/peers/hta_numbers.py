#!/usr/bin/env python3
"""Print HTA's own temporal breakdown, idle time breakdown and
communication/computation overlap for a folder of traces (one per rank), as
JSON, for comparison with ptscope's "as HTA" numbers (docs/validation.md).

Usage: hta_numbers.py HTA_SOURCE_DIR TRACE_DIR [--include-last-step]

HTA_SOURCE_DIR is a checkout of facebookresearch/HolisticTraceAnalysis (its
hta/ package is imported from there; HTA needs pandas, numpy, plotly,
networkx and pydot, e.g. Debian's python3-pandas python3-plotly
python3-networkx python3-pydot). HTA rounds event times to whole
microseconds unless HTA_DISABLE_NS_ROUNDING=1, which this script sets so
that both tools see the same nanoseconds. Only tables are asked for
(visualize=False).
"""
import json
import logging
import os
import sys


def main():
    src, traces = sys.argv[1], sys.argv[2]
    include_last = "--include-last-step" in sys.argv[3:]
    os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
    sys.path.insert(0, src)
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    files = {}
    for name in sorted(os.listdir(traces)):
        if ".json" not in name:
            continue
        path = os.path.join(traces, name)
        with_rank = rank_of(path)
        files[with_rank] = path
    ta = TraceAnalysis(trace_files=files, trace_dir=traces, include_last_profiler_step=include_last)
    out = {"ranks": {}}
    tb = ta.get_temporal_breakdown(visualize=False)
    for _, row in tb.iterrows():
        r = out["ranks"].setdefault(int(row["rank"]), {})
        r["temporal"] = {k: float(row[k]) for k in tb.columns if k != "rank"}
    ov = ta.get_comm_comp_overlap(visualize=False)
    for _, row in ov.iterrows():
        v = float(row["comp_comm_overlap_pctg"])
        # HTA divides by zero without communication kernels
        out["ranks"].setdefault(int(row["rank"]), {})["comp_comm_overlap_pctg"] = None if v != v else v
    idle, _ = ta.get_idle_time_breakdown(ranks=sorted(files), visualize=False)
    for _, row in idle.iterrows():
        r = out["ranks"].setdefault(int(row["rank"]), {})
        st = r.setdefault("idle_by_stream", {}).setdefault(str(int(row["stream"])), {})
        st[str(row["idle_category"])] = float(row["idle_time"])
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


def rank_of(path):
    """HTA's own rule: the first "rank": N in the file, else 0."""
    import gzip
    import re
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        head = f.read(1 << 20)
    m = re.search(r'"rank":\s+(\d+)', head)
    return int(m.group(1)) if m else 0


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The analyze bars of issue 10 on a real 1,000,000-entry snapshot (GPT-2 small training, made
# here by snapshot_scenarios.py big in about 2.5 minutes unless SNAPSHOT names one), on the GPU
# machine, with PASS/FAIL lines:
#   - analyze --out DIR takes at most 3x analyze --json (best of 3 each);
#   - COLUMNS=100 analyze prints at most 200 lines, none wider than 100 columns;
#   - analyze --json takes at most 0.10x Python's pickle.load of the same file;
#   - the C++-stack fixture's short stacks show .py lines and no "??" rows.
# Reports, the run folder and the timings go to $OUT.
#   [SNAPSHOT=...] [OUT=...] scripts/gpu/analyze_1m.sh [PTSCOPE]   (default bin/ptscope-linux-amd64)
set -u -o pipefail
cd "$(dirname "$0")/../.."
bin=${1:-$PWD/bin/ptscope-linux-amd64}
OUT=${OUT:-/tmp/ptscope-analyze}
mkdir -p "$OUT"
snap=${SNAPSHOT:-}
if [ -z "$snap" ]; then
  OUT=$OUT python3 scripts/gpu/snapshot_scenarios.py big 2>&1 | tail -2
  snap=/tmp/big_gpt2s_1m.pickle
fi
[ -s "$snap" ] || { echo "FAIL no snapshot at $snap"; exit 1; }
best() { sort -t$'\t' -k2,2n | head -1; }
runs() { for i in 1 2 3; do python3 scripts/measure.py "$@"; done | best; }
json=$(runs json "$bin" analyze --json "$snap")
out=$(runs out "$bin" analyze --out "$OUT/runs" "$snap")
py=$(runs python python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$snap")
printf '%s\n%s\n%s\n' "$json" "$out" "$py" | tee "$OUT/timings.tsv"
COLUMNS=100 "$bin" analyze "$snap" > "$OUT/report_100.txt"
"$bin" analyze --top 5 testdata/snapshots/gpt2tiny_train_bf16_cppstacks.pickle.xz > "$OUT/cppstacks.txt"
python3 - "$json" "$out" "$py" "$OUT/report_100.txt" "$OUT/cppstacks.txt" <<'PY'
import sys
json_s, out_s, py_s = (float(a.split("\t")[1]) for a in sys.argv[1:4])
lines = open(sys.argv[4], encoding="utf-8").read().splitlines()
width = max(len(l) for l in lines)
cpp = open(sys.argv[5], encoding="utf-8").read()
top = cpp[cpp.index("Largest allocations"):cpp.index("By source location")]
checks = [
    (f"analyze --out {out_s:.2f} s vs --json {json_s:.2f} s: {out_s/json_s:.2f}x (bar 3x)", out_s <= 3 * json_s),
    (f"COLUMNS=100 report: {len(lines)} lines (bar 200), widest {width} columns (bar 100)", len(lines) <= 200 and width <= 100),
    (f"analyze --json {json_s:.2f} s vs pickle.load {py_s:.2f} s: {json_s/py_s:.3f}x (bar 0.10x)", json_s <= 0.10 * py_s),
    (f"C++ stacks: {top.count('.py:')} .py lines, {top.count('??')} ?? rows in the top allocations", top.count(".py:") >= 5 and "??" not in top),
]
for text, ok in checks:
    print(("PASS " if ok else "FAIL ") + text)
PY

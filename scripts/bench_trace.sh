#!/usr/bin/env bash
# Benchmark `ptscope trace --json` against Python's bare json.load on the
# same Kineto trace, in one run: prints wall times, their ratio, MB/s (plain
# and gzip) and peak RSS (scripts/measure.py).
#
#   scripts/bench_trace.sh [TRACE.json]
#
# Without an argument it generates a ~360 MB trace (SIZE=360MB, or STEPS=N
# copies) by replicating the real with_stack fixture
# (../shared/fixtures/gpt2tiny_with_stack.pt.trace.json), which gives the
# event mix of a real 60-step GPT-2 with_stack trace. It also prints how many
# lines `COLUMNS=100 ptscope trace` prints and the widest (the bar: at most
# 200 lines, none over 100 columns).
# On a machine without Go (a GPU host), pass prebuilt binaries:
#   PTSCOPE=bin/ptscope-linux-amd64 GENTRACE=bin/gentrace scripts/bench_trace.sh
# RUNS (default 3) repeats each measurement and keeps the fastest.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=${PTSCOPE:-}
if [ -z "$bin" ]; then
  bin="$work/ptscope"
  CGO_ENABLED=0 go build -o "$bin" ./cmd/ptscope
fi
gentrace() {
  if [ -n "${GENTRACE:-}" ]; then "$GENTRACE" "$@"; else go run ./internal/kineto/gen/gentrace "$@"; fi
}

trace=${1:-}
if [ -z "$trace" ]; then
  src=${SRC:-../shared/fixtures/gpt2tiny_with_stack.pt.trace.json}
  [ -f "$src" ] || src=testdata/traces/real/gpt2tiny_with_stack.pt.trace.json.xz
  [ -f "$src" ] || { echo "no source trace $src (give a trace as argument)" >&2; exit 2; }
  trace="$work/big.pt.trace.json"
  if [ -n "${STEPS:-}" ]; then
    gentrace -src "$src" -steps "$STEPS" -o "$trace"
  else
    gentrace -src "$src" -size "${SIZE:-360MB}" -o "$trace"
  fi
fi
gz="$work/$(basename "$trace").gz"
gzip -c "$trace" > "$gz"

bytes=$(stat -c %s "$trace")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')

# measure CMD...: prints "<wall seconds> <peak RSS kB>" (scripts/measure.py:
# wall time and the peak RSS of the process tree, stdlib Python only)
measure() {
  python3 scripts/measure.py x "$@" | awk -F'\t' '{ print $2, $3 * 1024 }'
}

# best CMD...: the fastest of RUNS measurements
best() {
  local i
  for i in $(seq "${RUNS:-3}"); do measure "$@"; done | sort -n | head -1
}
read -r go_s go_kb < <(best "$bin" trace --json "$trace")
read -r gz_s gz_kb < <(best "$bin" trace --json "$gz")
read -r py_s py_kb < <(best python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$trace")

echo "trace: $trace ($mb MB, gzip $(awk -v b="$(stat -c %s "$gz")" 'BEGIN { printf "%.1f", b / 1e6 }') MB), $(nproc) cores"
awk -v mb="$mb" -v g="$go_s" -v gk="$go_kb" -v z="$gz_s" -v zk="$gz_kb" -v p="$py_s" -v pk="$py_kb" 'BEGIN {
  printf "%-34s %8s %10s %12s\n", "", "wall s", "MB/s", "peak RSS MB"
  printf "%-34s %8.2f %10.1f %12.1f\n", "ptscope trace --json (plain)", g, mb / g, gk / 1024
  printf "%-34s %8.2f %10.1f %12.1f\n", "ptscope trace --json (gzip)", z, mb / z, zk / 1024
  printf "%-34s %8.2f %10.1f %12.1f\n", "python3 json.load (plain)", p, mb / p, pk / 1024
  printf "speedup over json.load: %.1fx (plain), %.1fx (gzip); RSS %.1fx lower\n", p / g, p / z, pk / gk
}'

COLUMNS=100 "$bin" trace "$trace" > "$work/text.txt"
python3 - "$work/text.txt" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
print("COLUMNS=100 ptscope trace: %d lines, widest %d columns" % (len(lines), max(len(l) for l in lines)))
PY

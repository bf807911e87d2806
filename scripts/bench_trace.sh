#!/usr/bin/env bash
# Benchmark `ptscope trace --json` against Python's bare json.load on the
# same Kineto trace, in one run: prints wall times, their ratio, MB/s (plain
# and gzip) and peak RSS (from /usr/bin/time -v).
#
#   scripts/bench_trace.sh [TRACE.json]
#
# Without an argument it generates a ~360 MB trace (SIZE=360MB, or STEPS=N
# copies) by replicating the real with_stack fixture
# (../shared/fixtures/gpt2tiny_with_stack.pt.trace.json), which gives the
# event mix of a real 60-step GPT-2 with_stack trace. It also prints how many
# lines `COLUMNS=100 ptscope trace` prints and the widest (issue 10's bar:
# at most 200 lines, none over 100 columns).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "installing GNU time (apt-get install time)" >&2
  apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y time >/dev/null; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin="$work/ptscope"
CGO_ENABLED=0 go build -o "$bin" ./cmd/ptscope

trace=${1:-}
if [ -z "$trace" ]; then
  src=${SRC:-../shared/fixtures/gpt2tiny_with_stack.pt.trace.json}
  [ -f "$src" ] || { echo "no source trace $src (give a trace as argument)" >&2; exit 2; }
  trace="$work/big.pt.trace.json"
  if [ -n "${STEPS:-}" ]; then
    go run ./internal/kineto/gen/gentrace -src "$src" -steps "$STEPS" -o "$trace"
  else
    go run ./internal/kineto/gen/gentrace -src "$src" -size "${SIZE:-360MB}" -o "$trace"
  fi
fi
gz="$work/$(basename "$trace").gz"
gzip -c "$trace" > "$gz"

bytes=$(stat -c %s "$trace")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')

# measure CMD...: prints "<wall seconds> <peak RSS kB>"
measure() {
  /usr/bin/time -v "$@" >/dev/null 2>"$work/time.txt" || { cat "$work/time.txt" >&2; return 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$work/time.txt")
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.txt")
  echo "$wall $rss"
}

read -r go_s go_kb < <(measure "$bin" trace --json "$trace")
read -r gz_s gz_kb < <(measure "$bin" trace --json "$gz")
read -r py_s py_kb < <(measure python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$trace")

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

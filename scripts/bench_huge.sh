#!/usr/bin/env bash
# Benchmark `ptscope trace --json` on a trace too large to hold (issue 13,
# item 4): generates one (SIZE=10GB by default) in Kineto's layout (every
# step's host events first, then Python functions, then runtime calls and
# GPU work) from the real with_stack fixture, analyses it RUNS times with
# the default memory budget (which streams it in windows of steps), prints
# the best wall time, MB/s, CPU time and peak RSS (/usr/bin/time -v) and the
# load average, then deletes the inputs.
#
#   scripts/bench_huge.sh [TRACE.json]
#
# SIZE=10GB      size of the generated trace
# RUNS=2         runs of the streamed analysis (best wall time reported)
# GZ=1           also time the gzip-compressed trace
# COMPARE=1      also analyse it in memory (--max-memory 64GB) and compare
#                the two JSON documents byte for byte (needs ~0.6 x SIZE RAM)
# TMPDIR         where the trace and the streaming path's spill files go
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/bench.sh
bench_setup

trace=${1:-}
if [ -z "$trace" ]; then
  src=${SRC:-../shared/fixtures/gpt2tiny_with_stack.pt.trace.json}
  [ -f "$src" ] || { echo "no source trace $src (give a trace as argument)" >&2; exit 2; }
  trace="$work/huge.pt.trace.json"
  echo "generating ${SIZE:-10GB} into $work (df: $(df -h --output=avail "$work" | tail -1 | tr -d ' ') free)" >&2
  go run ./internal/kineto/gen/gentrace -src "$src" -size "${SIZE:-10GB}" -sections -o "$trace" >&2
fi
bytes=$(stat -c %s "$trace")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')

# measure NAME CMD...: runs CMD, prints "<wall s> <cpu s> <peak RSS kB>",
# keeps its stdout in $work/NAME.json and its stderr in $work/NAME.err
measure() {
  local name=$1
  shift
  /usr/bin/time -v "$@" >"$work/$name.json" 2>"$work/$name.err" || { cat "$work/$name.err" >&2; return 1; }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; wall = s }
    /User time/ { cpu += $2 } /System time/ { cpu += $2 }
    /Maximum resident set size/ { rss = $2 }
    END { print wall, cpu, rss }' "$work/$name.err"
}

# best NAME RUNS CMD...: the run of least wall time
best() {
  local name=$1 runs=$2
  shift 2
  local bw="" bc="" br=""
  for ((i = 0; i < runs; i++)); do
    read -r w c r < <(measure "$name" "$@")
    echo "  $name run $((i + 1)): ${w} s wall, ${c} s CPU, $((r / 1024)) MB peak RSS, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    if [ -z "$bw" ] || awk -v a="$w" -v b="$bw" 'BEGIN { exit !(a < b) }'; then bw=$w bc=$c br=$r; fi
  done
  echo "$bw $bc $br"
}

echo "trace: $mb MB, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r s_w s_c s_r < <(best streamed "${RUNS:-2}" "$bin" trace --json "$trace")
grep '^ptscope:' "$work/streamed.err" || true
printf '%-38s %8s %8s %10s %12s\n' "" "wall s" "CPU s" "MB/s" "peak RSS MB"
row() { awk -v n="$1" -v mb="$mb" -v w="$2" -v c="$3" -v r="$4" 'BEGIN { printf "%-38s %8.1f %8.1f %10.1f %12.0f\n", n, w, c, mb / w, r / 1024 }'; }
row "ptscope trace --json (streamed)" "$s_w" "$s_c" "$s_r"
echo "  CPU-bound rate on 2 free cores: $(awk -v mb="$mb" -v c="$s_c" 'BEGIN { printf "%.0f", mb / (c / 2) }') MB/s (MB over CPU seconds / 2)"

if [ -n "${GZ:-}" ]; then
  gzip -1 -c "$trace" > "$trace.gz"
  echo "gzip -1: $(awk -v b="$(stat -c %s "$trace.gz")" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
  read -r z_w z_c z_r < <(best gzip 1 "$bin" trace --json "$trace.gz")
  row "ptscope trace --json (gzip, streamed)" "$z_w" "$z_c" "$z_r"
  rm -f "$trace.gz"
fi

if [ -n "${COMPARE:-}" ]; then
  read -r m_w m_c m_r < <(best whole 1 "$bin" trace --max-memory 64GB --json "$trace")
  row "ptscope trace --json (in memory)" "$m_w" "$m_c" "$m_r"
  if cmp -s "$work/streamed.json" "$work/whole.json"; then
    echo "streamed and in-memory reports: identical ($(stat -c %s "$work/whole.json") bytes)"
  else
    echo "streamed and in-memory reports DIFFER"
    exit 1
  fi
fi

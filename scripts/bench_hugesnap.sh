#!/usr/bin/env bash
# Benchmark `ptscope analyze --json` on a snapshot too large to hold (issue
# 13, item 4): generates one (ENTRIES=50000000 by default, about 100 bytes
# of pickle per entry: 5 GB) with scripts/gensnapshot, analyses it RUNS
# times with the default memory budget (which spills the trace columns of a
# snapshot above a quarter of it to a temporary file), prints the best wall
# time, MB/s, CPU time, peak RSS (/usr/bin/time -v), the most disk the
# spill file took and the load average, then deletes the inputs.
#
#   scripts/bench_hugesnap.sh [SNAPSHOT.pickle]
#
# ENTRIES=50000000  trace entries of the generated snapshot
# RUNS=2            runs of the spilled analysis (best wall time reported)
# MAXMEM=           --max-memory for the spilled runs (default: the default
#                   budget; set e.g. 1GB to spill a smaller snapshot)
# COMPARE=1         also analyse it in memory (--max-memory 64GB, needs about
#                   the pickle's size in RAM) and compare the two JSON
#                   documents byte for byte
# TMPDIR            where the snapshot and the spill file go
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/bench.sh
bench_setup

snap=${1:-}
if [ -z "$snap" ]; then
  snap="$work/huge.pickle"
  echo "generating ${ENTRIES:-50000000} entries into $work (df: $(df -h --output=avail "$work" | tail -1 | tr -d ' ') free)" >&2
  go run ./scripts/gensnapshot -entries "${ENTRIES:-50000000}" -o "$snap" >&2
fi
bytes=$(stat -c %s "$snap")
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
tmp=${TMPDIR:-/tmp}

# measure NAME CMD...: runs CMD, prints "<wall s> <cpu s> <peak RSS kB>
# <most disk used under TMPDIR during the run, kB>", keeps its stdout in
# $work/NAME.json and its stderr in $work/NAME.err
measure() {
  local name=$1
  shift
  local used0 peak=0 u
  used0=$(df -k --output=used "$tmp" | tail -1)
  /usr/bin/time -v "$@" >"$work/$name.json" 2>"$work/$name.err" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    u=$(df -k --output=used "$tmp" | tail -1)
    [ "$u" -gt "$peak" ] && peak=$u
    sleep 0.5
  done
  wait "$pid" || { cat "$work/$name.err" >&2; return 1; }
  awk -F': ' -v disk="$((peak > used0 ? peak - used0 : 0))" '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; wall = s }
    /User time/ { cpu += $2 } /System time/ { cpu += $2 }
    /Maximum resident set size/ { rss = $2 }
    END { print wall, cpu, rss, disk }' "$work/$name.err"
}

# best NAME RUNS CMD...: the run of least wall time
best() {
  local name=$1 runs=$2
  shift 2
  local bw="" bc="" br="" bd=""
  for ((i = 0; i < runs; i++)); do
    read -r w c r d < <(measure "$name" "$@")
    echo "  $name run $((i + 1)): ${w} s wall, ${c} s CPU, $((r / 1024)) MB peak RSS, $((d / 1024)) MB disk, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    if [ -z "$bw" ] || awk -v a="$w" -v b="$bw" 'BEGIN { exit !(a < b) }'; then bw=$w bc=$c br=$r bd=$d; fi
  done
  echo "$bw $bc $br $bd"
}

entries=${ENTRIES:-50000000}
[ -n "${1:-}" ] && entries=${ENTRIES:-"?"}
echo "snapshot: $mb MB ($entries entries), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
mm=()
[ -n "${MAXMEM:-}" ] && mm=(--max-memory "$MAXMEM")
read -r s_w s_c s_r s_d < <(best spilled "${RUNS:-2}" "$bin" analyze "${mm[@]}" --json "$snap")
grep '^ptscope:' "$work/spilled.err" || echo "ptscope: (not spilled: the snapshot is below a quarter of the memory budget)"
printf '%-40s %8s %8s %10s %12s %10s\n' "" "wall s" "CPU s" "MB/s" "peak RSS MB" "disk MB"
row() { awk -v n="$1" -v mb="$mb" -v w="$2" -v c="$3" -v r="$4" -v d="$5" 'BEGIN { printf "%-40s %8.1f %8.1f %10.1f %12.0f %10.0f\n", n, w, c, mb / w, r / 1024, d / 1024 }'; }
row "ptscope analyze --json (spilled)" "$s_w" "$s_c" "$s_r" "$s_d"
echo "  CPU-bound rate on 2 free cores: $(awk -v mb="$mb" -v c="$s_c" 'BEGIN { printf "%.0f", mb / (c / 2) }') MB/s (MB over CPU seconds / 2)"

if [ -n "${COMPARE:-}" ]; then
  read -r m_w m_c m_r m_d < <(best whole 1 "$bin" analyze --max-memory 64GB --json "$snap")
  row "ptscope analyze --json (in memory)" "$m_w" "$m_c" "$m_r" "$m_d"
  if cmp -s "$work/spilled.json" "$work/whole.json"; then
    echo "spilled and in-memory reports: identical ($(stat -c %s "$work/whole.json") bytes)"
  else
    echo "spilled and in-memory reports DIFFER"
    exit 1
  fi
fi

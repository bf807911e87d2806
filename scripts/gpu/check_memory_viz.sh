#!/usr/bin/env bash
# ptscope export memory-viz checked by PyTorch's own torch.cuda._memory_viz, on a CUDA
# machine with torch (about 1-2 minutes; torch is imported by one checking process):
#   scripts/gpu/check_memory_viz.sh [PTSCOPE]    (default bin/ptscope-linux-amd64)
# For each snapshot (the committed real ones, ../shared or ./shared fixtures when
# present, and two recorded fresh here with empty_cache, plain and with expandable
# segments): the whole export must give the same stats, trace and flame-graph input
# as the original and load in trace_plot/segment_plot; exports trimmed to a step, to
# a range of entries and to allocations of at least 1 MiB must load and run in every
# _memory_viz function; the folded export of the fresh runs must equal torch's
# max_memory_allocated within 1%. Prints PASS/FAIL lines and a summary; exit 1 on FAIL.
set -u -o pipefail
cd "$(dirname "$0")/../.."
bin=${1:-$PWD/bin/ptscope-linux-amd64}
OUT=${OUT:-/tmp/ptscope-memviz}
work=$OUT/memory_viz
mkdir -p "$work"
log=$work/check.log
: > "$log"
py=scripts/gpu/check_memory_viz.py
status=0
step() { "$@" 2>&1 | tee -a "$log"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1; }

echo "== $(python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))' 2>&1 | tail -1)" | tee -a "$log"
step python3 "$py" make "$work"

snaps=()
for f in testdata/snapshots/validate_gpt2tiny_fp32.pickle.xz testdata/snapshots/expandable_gpt2_2l.pickle.xz \
         testdata/snapshots/oom_fragmentation.pickle.xz; do
  b=$(basename "$f" .xz)
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$f" "$work/$b"
  snaps+=("$work/$b")
done
for d in ../shared/fixtures shared/fixtures; do
  [ -f "$d/gpt2s_train_fp32_b4_ctx512.pickle" ] && { snaps+=("$d/gpt2s_train_fp32_b4_ctx512.pickle"); break; }
done
for n in fresh_plain fresh_expandable; do [ -f "$work/$n.pickle" ] && snaps+=("$work/$n.pickle"); done

jobs=$work/jobs.txt
: > "$jobs"
for s in "${snaps[@]}"; do
  b=$(basename "$s" .pickle)
  echo "== $b" | tee -a "$log"
  for form in json pickle; do
    if "$bin" export memory-viz -o "$work/$b.viz.$form" "$s" 2>>"$log"; then
      echo "compare $s $work/$b.viz.$form" >> "$jobs"
    else
      echo "FAIL $b: ptscope export memory-viz -o $b.viz.$form" | tee -a "$log"; status=1
    fi
  done
  for opts in "--steps 1-1" "--from 10 --to end" "--min-size 1MiB" "--steps 1-2 --min-size 1MiB"; do
    tag=$(echo "$opts" | tr -c 'a-zA-Z0-9\n' '_')
    ext=json; [ "$opts" = "--steps 1-1" ] && ext=pickle
    # a snapshot with fewer steps cannot be cut to them: a clear exit 2 is fine
    if "$bin" export memory-viz $opts -o "$work/$b.$tag.$ext" "$s" 2>>"$log"; then
      echo "window $work/$b.$tag.$ext" >> "$jobs"
    elif [ $? -ne 2 ]; then
      echo "FAIL $b: ptscope export memory-viz $opts" | tee -a "$log"; status=1
    else
      echo "SKIP $b: $opts ($(tail -1 "$log"))" | tee -a "$log"
    fi
  done
  if [ -f "$work/$b.facts.json" ]; then
    "$bin" export folded -o "$work/$b.folded" "$s" 2>>"$log" && echo "peak $work/$b.folded $work/$b.facts.json" >> "$jobs"
  fi
done
echo "== torch.cuda._memory_viz on $(wc -l < "$jobs") exports" | tee -a "$log"
step python3 "$py" jobs "$jobs"
echo "== $(grep -c '^PASS' "$log") PASS, $(grep -c '^FAIL' "$log") FAIL, $(grep -c '^SKIP' "$log") SKIP (log: $log)"
exit $status

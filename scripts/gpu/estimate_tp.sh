#!/usr/bin/env bash
# Measures the setups `ptscope estimate` models beyond one plain GPU (docs/estimate.md,
# "Validation"): tensor parallelism on a Hugging Face Llama of TinyLlama-1.1B's shape (random
# init, bf16 autocast, batch 4 x 2048) with the hf plan and a Megatron-style vocab-parallel plan at
# world sizes 2 and 4, then DDP, FSDP2 with CPU offload and torch.compile; every distributed row
# as one simulated rank: `ptscope run --simulate-world-size N` on one GPU. Results, one JSON
# object per row: $OUT/estimate_setups.jsonl; the log: $OUT/estimate_setups.log. Each row prints
# PASS or FAIL; rows that would start after DEADLINE seconds are skipped (SKIP).
#
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-linux-amd64 ./cmd/ptscope
#   OUT=out PTSCOPE=bin/ptscope-linux-amd64 bash scripts/gpu/estimate_tp.sh [ROW ...]
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
PTSCOPE=${PTSCOPE:-bin/ptscope-linux-amd64}
DEADLINE=${DEADLINE:-330}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
J=$OUT/estimate_setups.jsonl
LOG=$OUT/estimate_setups.log
BUNDLES=${BUNDLES:-/tmp/estimate_setups_bundles}
start=$(date +%s)
# name:world (world 1: a plain process, no simulation)
rows=("$@")
[ ${#rows[@]} -eq 0 ] && rows=(tinyllama_tp2_hf:2 tinyllama_tp4_hf:4 tinyllama_tp2_megatron:2 tinyllama_tp4_megatron:4
  llama_ddp1:1 llama_fsdp2_ws8_offload:8 llama_compile_amp:1 llama_ddp1_bucket_view:1 tinyllama_amp:1)
first=--env
status=0
for spec in "${rows[@]}"; do
  name=${spec%%:*} ws=${spec##*:}
  [ "$ws" = "$spec" ] && ws=1
  now=$(( $(date +%s) - start ))
  if [ "$now" -gt $(( DEADLINE - 45 )) ]; then
    echo "SKIP: $name (${now}s of ${DEADLINE}s used)" | tee -a "$LOG"
    continue
  fi
  if [ "$ws" -gt 1 ]; then
    "$PTSCOPE" run --quiet --out "$BUNDLES" --name "$name" --simulate-world-size "$ws" -- \
      python3 scripts/gpu/estimate_setups.py $first --rows "$name" --out "$J" >>"$LOG" 2>&1
  else
    python3 scripts/gpu/estimate_setups.py $first --rows "$name" --out "$J" >>"$LOG" 2>&1
  fi
  rc=$?
  first=
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAIL: $name exited $rc (see $LOG)"
  fi
  grep -E "^(PASS|FAIL): $name " "$LOG" | tail -1
done
python3 - "$J" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") != "row":
        continue
    m = r.get("measured") or {}
    print("%-26s ws %-2s max_alloc %7.2f GiB  reserved %7.2f GiB  %s" % (
        r["row"], r["setup"].get("world", 1), m.get("max_memory_allocated", 0) / 2**30,
        m.get("max_memory_reserved", 0) / 2**30, r.get("error", "")[:80]))
PY
echo "elapsed $(( $(date +%s) - start ))s"
exit $status

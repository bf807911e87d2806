#!/usr/bin/env bash
# The second batch behind docs/estimate.md's what-if and held-out tables: the OOM run's
# grad-accumulation proposal and a fused-AdamW loop (GPU 1), the Hugging Face Trainer with its
# defaults (GPU 0), Qwen3's per-head q/k norms on held-out shapes (GPU 2). $OUT/whatif2.jsonl.
#
#   OUT=out bash scripts/gpu/whatif_batch2.sh
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/whatif2_work
rm -rf "$W"
mkdir -p "$OUT" "$W"
S=scripts/gpu/whatif_runs.py
start=$(date +%s)
for job in 0:batch2_trainer 1:batch2_loop 2:batch2_qwen3; do
  gpu=${job%%:*} group=${job##*:}
  ( CUDA_VISIBLE_DEVICES=$gpu timeout 150 python3 "$S" --rows "$group" --out "$W/$group.jsonl" >"$W/log_$group" 2>&1
    echo "$group exit $? at $(( $(date +%s) - start ))s" ) &
done
wait
cat "$W"/*.jsonl >"$OUT/whatif2.jsonl" 2>/dev/null
for f in "$W"/log_*; do echo "=== $f"; grep -E "^(PASS|FAIL|OOM)|Error" "$f" | head -20; done
tail -c 30000 "$W"/log_* >"$OUT/whatif2_logs.txt"

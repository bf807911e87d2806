#!/usr/bin/env bash
# The real runs behind `ptscope estimate --from` and the estimate's held-out set
# (docs/estimate.md, "What-if from a run" and "Held-out runs"), on one host of 4 GPUs:
#   phase 1, one job per GPU: GPU 0 captures the Llama loop in bf16 autocast, its fp32 twin
#   and a run out of memory under `ptscope run`; GPU 1 re-runs the loop with one flag changed
#   each time (the what-ifs' truth); GPUs 2 and 3 run the held-out single-GPU rows, then
#   capture a tuning row each;
#   phase 2: FSDP2 on 2 GPUs beside tensor parallelism on the other 2, FSDP2 on 4 GPUs,
#   FSDP2 x TP on 4 GPUs (torchrun, real NCCL).
# Results in $OUT: whatif.jsonl (every row of every rank), whatif.log, one .tgz per bundle.
# Jobs that would start after DEADLINE seconds are skipped (SKIP in the log).
#
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope ./cmd/ptscope
#   OUT=out PTSCOPE=bin/ptscope bash scripts/gpu/whatif.sh
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
PTSCOPE=${PTSCOPE:-bin/ptscope}
DEADLINE=${DEADLINE:-250}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/whatif_work
B=/tmp/whatif_bundles
rm -rf "$W" "$B"
mkdir -p "$OUT" "$W" "$B"
LOG=$OUT/whatif.log
S=scripts/gpu/whatif_runs.py
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
{ nvidia-smi --query-gpu=name,memory.total --format=csv; python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)'; } >>"$LOG" 2>&1

capture() { # GPU NAME [ARGS...]
  local gpu=$1 name=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu "$PTSCOPE" run --quiet --out "$B" --name "$name" -- \
    python3 "$S" --rows "$name" --out "$W/cap_$name.jsonl" "$@" >>"$W/log_cap_$name" 2>&1
  echo "capture $name exit $? at $(elapsed)s"
}
plain() { # GPU GROUP
  CUDA_VISIBLE_DEVICES=$1 python3 "$S" --rows "$2" --out "$W/plain_$2.jsonl" >>"$W/log_plain_$2" 2>&1
  echo "plain $2 exit $? at $(elapsed)s"
}
dist() { # GPUS N ROW
  if [ "$(elapsed)" -gt $(( DEADLINE - 40 )) ]; then echo "SKIP: $3 at $(elapsed)s"; return; fi
  CUDA_VISIBLE_DEVICES=$1 timeout 75 python3 -m torch.distributed.run --standalone --nproc-per-node "$2" \
    "$S" --rows "$3" --out "$W/dist_$3.jsonl" >>"$W/log_dist_$3" 2>&1
  echo "dist $3 exit $? at $(elapsed)s"
}

# phase 1
export S PTSCOPE B W start
export -f capture plain elapsed
( timeout 170 bash -c 'capture 0 wi_bf16_mb8; capture 0 wi_fp32_mb8; capture 0 wi_oom_s512_mb48 --raise-oom; plain 0 re_oom_mb24_es' ) >>"$LOG" 2>&1 &
( timeout 170 bash -c 'plain 1 rerun' ) >>"$LOG" 2>&1 &
( timeout 170 bash -c 'plain 2 heldout_a; capture 2 t_qwen3_amp' ) >>"$LOG" 2>&1 &
( timeout 170 bash -c 'plain 3 heldout_b; capture 3 t_phi3_amp' ) >>"$LOG" 2>&1 &
wait
echo "phase 1 done at $(elapsed)s" >>"$LOG"

# phase 2
dist 0,1 2 m_qwen25_fsdp2_ws2 >>"$LOG" 2>&1 &
dist 2,3 2 m_mistralw_tp2_hf >>"$LOG" 2>&1 &
wait
dist 0,1,2,3 4 m_l32_fsdp2_ws4_ckpt >>"$LOG" 2>&1
dist 0,1,2,3 4 m_mistralw_fsdp2_tp2_ws4 >>"$LOG" 2>&1

cat "$W"/*.jsonl* >"$OUT/whatif.jsonl" 2>/dev/null
for f in "$W"/log_*; do echo "=== $f"; grep -E "^(PASS|FAIL|OOM)|Error|error" "$f" | head -20; done >>"$LOG"
tail -c 20000 "$W"/log_* >"$OUT/job_logs.txt" 2>/dev/null
for d in "$B"/*/; do
  [ -d "$d" ] || continue
  n=$(basename "$d")
  [ -L "${d%/}" ] && continue
  tar -C "$B" -czf "$OUT/$n.tgz" "$n" 2>>"$LOG"
  # at most 16 MiB a file comes back: drop later windows and traces, then the first window
  for ex in 'snapshot_window[1-9]*' 'snapshot_window*'; do
    [ "$(stat -c %s "$OUT/$n.tgz")" -lt 15000000 ] && break
    tar -C "$B" -czf "$OUT/$n.tgz" --exclude="$ex" --exclude='*.pt.trace.json.gz' "$n" 2>>"$LOG"
  done
done
ls -la "$OUT" >>"$LOG"
echo "done at $(elapsed)s" >>"$LOG"

#!/usr/bin/env bash
# The truth of a tensor-parallel what-if (docs/estimate.md, "What-if from a run"): FSDP2 x TP
# (dp 2 x tp 2, the hf plan) of the Qwen2.5-1.5B-shaped model on 4 GPUs, the layout that
# `estimate --from` predicts with --tp 2 from the committed FSDP2 capture on 2 GPUs
# (internal/whatif/testdata/bundles/m_qwen25_fsdp2_ws2). The same job is then captured under
# `ptscope run` for the reverse what-if (--tp 1: FSDP2 on 2 GPUs, whose truth is committed).
# PARTS=tpalone captures a one-GPU job (t_mistralw_amp, tpalone_capture.tgz) for --tp 2 against
# the tensor-parallel re-run m_mistralw_tp2_hf (its truth is committed).
# PARTS=ws2 captures the FSDP2 job on 2 GPUs again (ws2_capture.tgz), whole: the committed
# bundle of it was cut without the inventory that shows the gathered bf16 parameters.
# Results in $OUT: tp.jsonl (every rank's row), pred_tp2.json, pred_tp1.json, the capture's rank 0
# (tp_capture.tgz, traces left out) and whatif_tp.log.
#
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope ./cmd/ptscope
#   OUT=out PTSCOPE=bin/ptscope [PARTS="tp ws2 tpalone"] bash scripts/gpu/whatif_tp.sh
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
PTSCOPE=$(cd "$(dirname "${PTSCOPE:-bin/ptscope}")" && pwd)/$(basename "${PTSCOPE:-bin/ptscope}")
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/whatif_tp
rm -rf "$W"
mkdir -p "$OUT" "$W"
LOG=$OUT/whatif_tp.log
S=scripts/gpu/whatif_runs.py
ROW=m_qwen25_fsdp2_tp2_ws4
PARTS=${PARTS:-tp}
{ nvidia-smi --query-gpu=name,memory.total --format=csv; python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)'; } >>"$LOG" 2>&1
if [[ " $PARTS " == *" tpalone "* ]]; then
  CUDA_VISIBLE_DEVICES=0 timeout 150 "$PTSCOPE" run --quiet --out "$W/b3" --name tpalone_capture -- python3 "$S" \
    --rows t_mistralw_amp --out "$W/tpalone.jsonl" >"$W/log_tpalone" 2>&1
  echo "tpalone capture exit $? at ${SECONDS}s" >>"$LOG"
  B3=$(ls -d "$W"/b3/*tpalone_capture* 2>/dev/null | head -1)
  [ -n "$B3" ] && tar -C "$B3" -czf "$OUT/tpalone_capture.tgz" --exclude='*.pt.trace.json.gz' --exclude='snapshot*' rank0 manifest.json
  cat "$W"/tpalone.jsonl* >"$OUT/tpalone.jsonl" 2>/dev/null
  [ -n "$B3" ] && "$PTSCOPE" estimate --from "$B3" --tp 2 >>"$LOG" 2>&1
  tail -c 3000 "$W/log_tpalone" >>"$LOG"
fi
if [[ " $PARTS " == *" ws2 "* ]]; then
  CUDA_VISIBLE_DEVICES=0,1 timeout 150 "$PTSCOPE" run --quiet --out "$W/b2" --name ws2_capture -- python3 -m torch.distributed.run \
    --standalone --nproc-per-node 2 "$S" --rows m_qwen25_fsdp2_ws2 --out "$W/ws2.jsonl" >"$W/log_ws2" 2>&1
  echo "ws2 capture exit $? at ${SECONDS}s" >>"$LOG"
  B2=$(ls -d "$W"/b2/*ws2_capture* 2>/dev/null | head -1)
  [ -n "$B2" ] && tar -C "$B2" -czf "$OUT/ws2_capture.tgz" --exclude='*.pt.trace.json.gz' --exclude='snapshot*' rank0 manifest.json
  cat "$W"/ws2.jsonl* >"$OUT/ws2.jsonl" 2>/dev/null
  [ -n "$B2" ] && "$PTSCOPE" estimate --from "$B2" --tp 2 >>"$LOG" 2>&1
fi
[[ " $PARTS " == *" tp "* ]] || exit 0
"$PTSCOPE" estimate --from internal/whatif/testdata/bundles/m_qwen25_fsdp2_ws2 --tp 2 --json >"$OUT/pred_tp2.json" 2>>"$LOG"
"$PTSCOPE" estimate --from internal/whatif/testdata/bundles/m_qwen25_fsdp2_ws2 --tp 2 >>"$LOG" 2>&1
# the truth, without ptscope
timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node 4 "$S" --rows "$ROW" \
  --out "$W/tp.jsonl" >"$W/log_plain" 2>&1
echo "plain exit $? at ${SECONDS}s" >>"$LOG"
cat "$W"/tp.jsonl* >"$OUT/tp.jsonl" 2>/dev/null
# the capture, for --tp 1
timeout 180 "$PTSCOPE" run --quiet --out "$W/b" --name tp_capture -- python3 -m torch.distributed.run --standalone \
  --nproc-per-node 4 "$S" --rows "$ROW" --out "$W/cap.jsonl" >"$W/log_cap" 2>&1
echo "capture exit $? at ${SECONDS}s" >>"$LOG"
B=$(ls -d "$W"/b/*tp_capture* 2>/dev/null | head -1)
if [ -n "$B" ]; then
  "$PTSCOPE" estimate --from "$B" --tp 1 --json >"$OUT/pred_tp1.json" 2>>"$LOG"
  "$PTSCOPE" estimate --from "$B" --tp 1 >>"$LOG" 2>&1
  tar -C "$B" -czf "$OUT/tp_capture.tgz" --exclude='*.pt.trace.json.gz' --exclude='snapshot_window[1-9]*' rank0 manifest.json 2>>"$LOG"
fi
cat "$W"/cap.jsonl* >"$OUT/cap.jsonl" 2>/dev/null
grep -hE "^(PASS|FAIL|OOM)|Error|error" "$W"/log_* | head -40 >>"$LOG"
tail -c 6000 "$W"/log_plain >>"$LOG"
echo "done at ${SECONDS}s" >>"$LOG"

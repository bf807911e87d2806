#!/usr/bin/env bash
# Real multi-GPU runs against `ptscope run --simulate-world-size` on the same
# host, per layout and per rank, in one call on a 4-GPU machine (about 6 min):
#
#   1. real: torchrun --nproc-per-node 4 scripts/gpu/layouts.py (FSDP2, TP,
#      FSDP2xTP, pipelining GPipe/1F1B/interleaved/ZBV, expert parallel), and
#      Megatron-LM pretrain_gpt.py TP2 x PP2 (mock data, --transformer-impl
#      local) under ptscope run (a bundle with the 4 ranks);
#   2. simulated, four at a time (one GPU each): the same layouts with
#      --simulate-world-size 4 --simulate-rank all (one bundle, a folder per
#      rank), Megatron TP2 x PP2 the same way, and Megatron TP2 x PP4 x DP2
#      (world 16) simulated only; meanwhile, with CUDA hidden, FSDP2 under
#      --no-gpu --simulate-world-size 4 and 8;
#   3. FSDP2 --simulate-world-size 8 on a GPU (the world-8 reference);
#   4. the table: each simulated rank's max_memory_allocated against the real
#      rank's (simulate_layouts.json, simulate_layouts.log).
#
# Usage (GPU machine; PTSCOPE a Linux ptscope binary, MEGATRON a Megatron-LM
# checkout with megatron/core, megatron/training, pretrain_gpt.py,
# gpt_builders.py, model_provider.py):
#   PTSCOPE=./ptscope MEGATRON=./Megatron-LM OUT=out scripts/gpu/simulate_layouts.sh
# PARTS (default "real mlmreal sim nogpu sim8 table") picks steps.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-layouts}
OUT=${OUT:-$WORK/out}
PARTS=${PARTS:-real mlmreal sim mlmsim nogpu table}
SIM_LAYOUTS=${SIM_LAYOUTS:-fsdp2,tp,fsdp2tp,ep}
SIM_PP_LAYOUTS=${SIM_PP_LAYOUTS:-pp_1f1b,pp_interleaved,pp_gpipe,pp_zbv}
MLM16_RANKS=${MLM16_RANKS:-0,4,8,12}
MLM_ALONE=${MLM_ALONE:-0}
TMO=${TMO:-280} # seconds for each run
LAYOUTS=${LAYOUTS:-fsdp2,tp,fsdp2tp,ep,pp_1f1b,pp_interleaved,pp_gpipe,pp_zbv}
PTSCOPE=$(cd "$(dirname "${PTSCOPE:-ptscope}")" && pwd)/$(basename "${PTSCOPE:-ptscope}")
MEGATRON=${MEGATRON:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export CUDA_DEVICE_MAX_CONNECTIONS=1 # Megatron asks for it with TP
mkdir -p "$WORK" "$OUT"
J=$WORK/json
mkdir -p "$J"
LOG=$OUT/simulate_layouts.log
say() { echo "$*" | tee -a "$LOG"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
RUNOPT="--quiet --stacks none"
LP="$HERE/layouts.py"
say "== $(date -u +%FT%TZ) $($PYTHON -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), torch.cuda.get_device_name(0))' 2>&1 | tail -1)"

# Megatron-LM: TP2 x PP2 on 4 ranks; world 16 = TP2 x PP4 x DP2
MLM_COMMON="--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
 --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 16 --train-iters 3 --lr 1e-4
 --min-lr 1e-5 --lr-decay-style constant --weight-decay 0.1 --bf16 --mock-data --tokenizer-type NullTokenizer
 --vocab-size 32000 --transformer-impl local --no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-persist-layer-norm
 --eval-iters 0 --eval-interval 1000 --log-interval 1 --seed 1234"
MLM4="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 $MLM_COMMON"
MLM16="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 $MLM_COMMON"
mlm_prepare() {
  [ -n "$MEGATRON" ] || return 1
  [ -e "$MEGATRON/.ptscope-prepared" ] && return 0
  local d=$MEGATRON/megatron/core/datasets
  if ! ls "$d"/helpers_cpp*.so >/dev/null 2>&1; then
    local inc ext tinc
    inc=$($PYTHON -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    ext=$($PYTHON -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    tinc=$($PYTHON -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
    if g++ -O3 -Wall -shared -std=c++17 -fPIC -I"$inc" -I"$tinc" "$d/helpers.cpp" -o "$d/helpers_cpp$ext" >>"$LOG" 2>&1; then
      say "-- megatron: compiled helpers_cpp$ext with torch's pybind11 headers"
    else
      cp "$HERE/megatron/helpers_cpp.py" "$d/helpers_cpp.py"
      say "-- megatron: no compiler; using scripts/gpu/megatron/helpers_cpp.py"
    fi
  fi
  touch "$MEGATRON/.ptscope-prepared"
}

# Everything runs at once: the numbers compared are each process's own
# allocator counters, which other processes on the same GPU do not change
# (each GPU holds at most about 45 GB of them here).
t0=$SECONDS
pids=()
names=()
bg() { local name=$1; shift; ( "$@" ) >"$WORK/$name.log" 2>&1 & pids+=($!); names+=("$name"); }
if has real; then
  bg real timeout $TMO $PYTHON -m torch.distributed.run --standalone --nproc-per-node 4 "$LP" --layouts "$LAYOUTS" \
    --json-dir "$J" --tag real
fi
if has mlmreal && mlm_prepare; then
  bg mlm_real bash -c "cd '$MEGATRON' && timeout $TMO '$PTSCOPE' run $RUNOPT --out '$WORK/mlm_real' -- \
    $PYTHON -m torch.distributed.run --standalone --nproc-per-node 4 pretrain_gpt.py $(echo $MLM4)"
fi
if has sim; then
  [ -n "$SIM_LAYOUTS" ] && bg sim_dense env CUDA_VISIBLE_DEVICES=0 timeout $TMO "$PTSCOPE" run $RUNOPT --out "$WORK/sim_dense" \
    --simulate-world-size 4 --simulate-rank all -- $PYTHON "$LP" --layouts "$SIM_LAYOUTS" --json-dir "$J" --tag sim
  [ -n "$SIM_LAYOUTS" ] && bg sim8 env CUDA_VISIBLE_DEVICES=0 timeout $TMO "$PTSCOPE" run $RUNOPT --out "$WORK/sim8" --simulate-world-size 8 -- \
    $PYTHON "$LP" --layouts fsdp2 --json-dir "$J" --tag sim8
  [ -n "$SIM_PP_LAYOUTS" ] && bg sim_pp env CUDA_VISIBLE_DEVICES=1 timeout $TMO "$PTSCOPE" run $RUNOPT --out "$WORK/sim_pp" --simulate-world-size 4 \
    --simulate-rank all -- $PYTHON "$LP" --layouts "$SIM_PP_LAYOUTS" --json-dir "$J" --tag simpp
  [ -n "$SIM_LAYOUTS" ] && bg sim_imb env CUDA_VISIBLE_DEVICES=1 timeout $TMO "$PTSCOPE" run $RUNOPT --out "$WORK/sim_imb" --simulate-world-size 4 \
    --simulate-imbalance 1.3 -- $PYTHON "$LP" --layouts ep --json-dir "$J" --tag simimb
fi
if has mlmsim && mlm_prepare; then
  # one bundle with the 4 ranks one after another (GPU 2), the ranks of
  # MLM_ALONE each alone as well, and world 16 (GPU 3). A rank other than 0
  # alone does not train: Megatron's do_train flag is broadcast from rank 0,
  # which only a bundle that simulated rank 0 before it can replay.
  bg mlm_sim bash -c "cd '$MEGATRON' && CUDA_VISIBLE_DEVICES=2 timeout $TMO '$PTSCOPE' run $RUNOPT --out '$WORK/mlm_sim' \
    --simulate-world-size 4 --simulate-rank all -- $PYTHON pretrain_gpt.py $(echo $MLM4)"
  for r in $MLM_ALONE; do
    bg mlm_sim_r$r bash -c "cd '$MEGATRON' && CUDA_VISIBLE_DEVICES=$(( (r + 3) % 4 )) timeout $TMO '$PTSCOPE' run $RUNOPT \
      --out '$WORK/mlm_sim_r$r' --simulate-world-size 4 --simulate-rank $r -- $PYTHON pretrain_gpt.py $(echo $MLM4)"
  done
  bg mlm_sim16 bash -c "cd '$MEGATRON' && CUDA_VISIBLE_DEVICES=3 timeout $TMO '$PTSCOPE' run $RUNOPT --out '$WORK/mlm_sim16' \
    --simulate-world-size 16 --simulate-rank $MLM16_RANKS -- $PYTHON pretrain_gpt.py $(echo $MLM16)"
fi
if has nogpu; then
  for w in 4 8; do
    bg nogpu$w env CUDA_VISIBLE_DEVICES= timeout $TMO "$PTSCOPE" run $RUNOPT --out "$WORK/nogpu$w" --no-gpu \
      --simulate-world-size $w -- $PYTHON "$LP" --layouts fsdp2 --json-dir "$J" --tag nogpu$w
  done
fi
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  say "-- ${names[$i]}: exit $? after $((SECONDS - t0)) s"
  grep -E "^layout|Error|error:|ptscope|iteration +[0-9]+/" "$WORK/${names[$i]}.log" | tail -40 | tee -a "$LOG"
done

if has table; then
  for b in mlm_sim mlm_real; do
    [ -e "$WORK/$b/latest" ] && "$PTSCOPE" analyze --fleet on --json "$WORK/$b/latest" >"$WORK/$b.analyze.json" 2>"$WORK/$b.analyze.err"
  done
  [ -e "$WORK/mlm_sim/latest" ] && { say "-- ptscope analyze (simulated Megatron, --simulate-rank all)"; "$PTSCOPE" analyze "$WORK/mlm_sim/latest" 2>&1 | head -40 | tee -a "$LOG"; }
  $PYTHON "$HERE/simulate_layouts_table.py" "$WORK" "$OUT/simulate_layouts.json" 2>&1 | tee -a "$LOG"
fi
( cd "$WORK" && find . -path '*/latest' -prune -o \( -name manifest.json -o -name process.json -o -name simulation.json \
    -o -name companion.log -o -name '*.log' -o -name '*.json' -o -name 'phases.jsonl' \) -print | grep -v '/\.ptscope/' \
    | tar czf "$OUT/simulate_layouts_files.tar.gz" -T - ) 2>/dev/null
say "== done $(date -u +%FT%TZ)"

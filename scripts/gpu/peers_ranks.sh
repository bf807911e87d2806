#!/usr/bin/env bash
# Records the real 4-rank traces of issue 29 (scripts/gpu/peers_ranks.py):
# DDP and FSDP2 under torchrun, each healthy and with 20 ms of extra host
# work per step on one rank (rank 2 for DDP, rank 0 for FSDP2), and packs
# each case's folder into $OUT/CASE.tar.
#
#   scripts/gpu/peers_ranks.sh        # about 2 minutes on 4 H100s
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/peers-ranks}
NPROC=${NPROC:-4}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
WORK=$(mktemp -d)
mkdir -p "$OUT"
FAIL=0
port=29611
for c in "ddp -1 0" "ddp 2 20" "fsdp2 -1 0" "fsdp2 0 20"; do
  set -- $c
  name=$1
  [ "$2" -ge 0 ] && name=${1}_slow$2
  port=$((port + 1))
  if torchrun --nproc-per-node "$NPROC" --master-port $port scripts/gpu/peers_ranks.py --mode "$1" \
       --slow-rank "$2" --slow-ms "$3" --out "$WORK/$name" >"$WORK/$name.log" 2>&1; then
    echo "ok: $name: $(ls "$WORK/$name" | tr '\n' ' ')"
  else
    echo "FAIL: $name (log below)"; tail -20 "$WORK/$name.log"; FAIL=1
  fi
  mv "$WORK/$name.log" "$WORK/$name/" 2>/dev/null
  tar -C "$WORK" -cf "$OUT/$name.tar" "$name"
done
ls -la "$OUT"
rm -rf "$WORK"
exit $FAIL

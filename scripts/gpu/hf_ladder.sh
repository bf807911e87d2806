#!/usr/bin/env bash
# The estimate ladder on one GPU (docs/estimate.md): every single-process row of
# scripts/gpu/hf_ladder.py, then the FSDP2 and tensor-parallel ranks under
# `ptscope run --simulate-world-size N`. Results: $OUT/hf_ladder.jsonl.
#
#   OUT=out PTSCOPE=bin/ptscope-linux-amd64 bash scripts/gpu/hf_ladder.sh [ROW:WORLD ...]
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
PTSCOPE=${PTSCOPE:-bin/ptscope-linux-amd64}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
L=$OUT/hf_ladder.jsonl
python3 scripts/gpu/hf_ladder.py --env --rows single --out "$L" || echo "FAIL: single rows exited $?"
dist=("$@")
[ ${#dist[@]} -eq 0 ] && dist=(llama_fsdp2_ws8:8 llama_fsdp2_ws8_ckpt:8 llama_tp2_hf:2 llama_tp4_hf:4)
for d in "${dist[@]}"; do
  name=${d%%:*} ws=${d##*:}
  "$PTSCOPE" run --quiet --out /tmp/ladder_bundles --name "$name" --simulate-world-size "$ws" -- \
    python3 scripts/gpu/hf_ladder.py --rows "$name" --out "$L" || echo "FAIL: $name exited $?"
done
python3 - "$L" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") != "row":
        continue
    m = r.get("measured") or {}
    print("%-24s %8s  max_alloc %7.2f GiB  reserved %7.2f GiB  %s" % (
        r["row"], r["setup"].get("world", 1), m.get("max_memory_allocated", 0) / 2**30,
        m.get("max_memory_reserved", 0) / 2**30, r.get("error", "")[:80]))
PY

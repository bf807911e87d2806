#!/usr/bin/env bash
# Profiles model sizes x context lengths x precision (forward vs full training
# step) under `ptscope run`, one bundle per configuration, and ends with one
# table of peaks.
#
#   SIZES="small medium" CONTEXTS="256 512 1024" examples/memory_sweep.sh
#
# Environment: SIZES, CONTEXTS, PRECISIONS (default "none bf16"), BATCH (4),
# STEPS (3), SWEEP_OUT (bundles, default sweep-runs), PTSCOPE (ptscope binary),
# PYTHON (python3 with torch and CUDA).
set -u -o pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"small medium"}
CONTEXTS=${CONTEXTS:-"256 512 1024"}
PRECISIONS=${PRECISIONS:-"none bf16"}
BATCH=${BATCH:-4}
STEPS=${STEPS:-3}
SWEEP_OUT=${SWEEP_OUT:-sweep-runs}
PTSCOPE=${PTSCOPE:-ptscope}
PYTHON=${PYTHON:-python3}
mkdir -p "$SWEEP_OUT"
RESULTS=$SWEEP_OUT/results.tsv
printf 'size\tcontext\tprecision\tprofile\texit\tmax_memory_allocated\tmax_device_used\tbundle\n' >"$RESULTS"
status=0
for size in $SIZES; do
  for ctx in $CONTEXTS; do
    for prec in $PRECISIONS; do
      for ptype in forward training; do
        name="${size}_ctx${ctx}_${prec}_${ptype}"
        log="$SWEEP_OUT/$name.log"
        "$PTSCOPE" run --quiet --out "$SWEEP_OUT" --name "$name" --snapshot-at end -- \
          "$PYTHON" examples/transformer_lm.py --model-size "$size" --context-length "$ctx" \
          --batch-size "$BATCH" --mixed-precision "$prec" --profile-type "$ptype" --steps "$STEPS" >"$log" 2>&1
        rc=$?
        [ "$rc" = 0 ] || status=1
        bundle=$(readlink -f "$SWEEP_OUT/latest")
        peak=$(sed -n 's/^max_memory_allocated=//p' "$log" | tail -1)
        dev=$("$PYTHON" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(max([r.get("max_device_used_bytes",0) for r in m["ranks"]] or [0]))' "$bundle/manifest.json" 2>/dev/null)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$ctx" "$prec" "$ptype" "$rc" "${peak:-?}" "${dev:-?}" "$(basename "$bundle")" >>"$RESULTS"
        echo "$name: exit $rc, max_memory_allocated=${peak:-?}"
      done
    done
  done
done
# One table: peak allocated (as the script measured it) for forward vs full
# training step, fp32 ("none") vs bf16.
"$PYTHON" - "$RESULTS" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def gib(v):
    try: return "%.2f GiB" % (int(v) / 2**30)
    except ValueError: return "?"
cols = []
for r in rows:
    c = (r["precision"], r["profile"])
    if c not in cols: cols.append(c)
cell = {(r["size"], r["context"], r["precision"], r["profile"]): r["max_memory_allocated"] for r in rows}
keys = []
for r in rows:
    k = (r["size"], r["context"])
    if k not in keys: keys.append(k)
hdr = ["size", "context"] + ["%s %s" % ("fp32" if p == "none" else p, t) for p, t in cols]
w = [max(len(h), 10) for h in hdr]
print("peak allocated (torch.cuda.max_memory_allocated) per configuration:")
print("  ".join(h.ljust(x) for h, x in zip(hdr, w)))
for s, c in keys:
    vals = [s, c] + [gib(cell.get((s, c, p, t), "?")) for p, t in cols]
    print("  ".join(v.ljust(x) for v, x in zip(vals, w)))
PY
# The same bundles through ptscope's analyzer (one table of peaks per bundle folder).
if "$PTSCOPE" help analyze >/dev/null 2>&1; then
  "$PTSCOPE" analyze "$SWEEP_OUT" || status=1
fi
exit $status

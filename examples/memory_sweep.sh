#!/usr/bin/env bash
# Profiles model sizes x context lengths x precision (forward vs full training
# step) under `ptscope run`, one bundle per configuration, and ends with the
# seed's tables of measured peaks beside `ptscope estimate --sweep` for the same
# grid (the estimate's counterpart: ptscope estimate --sweep model=lm-small,lm-medium
# seq=256,512,1024 dtype=fp32,bf16 --micro-batch 4).
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
# The seed's tables, measured: model size x context length per precision, for the forward pass
# and the full training step, each cell torch.cuda.max_memory_allocated and, beside it, what
# `ptscope estimate` predicts for the same configuration (presets lm-<size>) and its error.
est_json() { # profile -> the estimate sweep's JSON
  local extra=()
  [ "$1" = forward ] && extra=(--forward-only)
  local models=() seqs=() dts=()
  for size in $SIZES; do models+=("lm-$size"); done
  for ctx in $CONTEXTS; do seqs+=("$ctx"); done
  for prec in $PRECISIONS; do [ "$prec" = none ] && dts+=(fp32) || dts+=("$prec"); done
  local IFS=,
  "$PTSCOPE" estimate --micro-batch "$BATCH" "${extra[@]}" --json \
    --sweep "model=${models[*]}" "seq=${seqs[*]}" "dtype=${dts[*]}" 2>/dev/null
}
est_json training >"$SWEEP_OUT/estimate_training.json" || true
est_json forward >"$SWEEP_OUT/estimate_forward.json" || true
"$PYTHON" - "$RESULTS" "$SWEEP_OUT" <<'PY'
import csv, json, os, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
est = {}
for profile in ("training", "forward"):
    path = os.path.join(sys.argv[2], "estimate_%s.json" % profile)
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        continue
    for r in doc.get("rows", []):
        v = r["values"]
        if not r.get("error"):
            est[(v["model"][3:], str(v["seq"]), v["dtype"], profile)] = r["peak_allocated_bytes"]
gib = lambda b: "%.2f GiB" % (b / 2**30)
sizes, ctxs = [], []
for r in rows:
    if r["size"] not in sizes: sizes.append(r["size"])
    if r["context"] not in ctxs: ctxs.append(r["context"])
for profile in ("training", "forward"):
    for prec in sorted({r["precision"] for r in rows}):
        dt = "fp32" if prec == "none" else prec
        print("\npeak allocated, %s, %s (measured | estimate, error)" % (profile, dt))
        print("  %-8s" % "size" + "".join("%-34s" % ("seq " + c) for c in ctxs))
        for size in sizes:
            cells = []
            for c in ctxs:
                m = [r for r in rows if (r["size"], r["context"], r["precision"], r["profile"]) == (size, c, prec, profile)]
                try:
                    meas = int(m[0]["max_memory_allocated"])
                except (IndexError, ValueError):
                    cells.append("%-34s" % "-")
                    continue
                e = est.get((size, c, dt, profile))
                cell = gib(meas) + (" | %s %+.1f%%" % (gib(e), 100 * (e / meas - 1)) if e else "")
                cells.append("%-34s" % cell)
            print("  %-8s" % size + "".join(cells))
PY
# The same bundles through ptscope's analyzer (one table of peaks per bundle folder).
if "$PTSCOPE" help analyze >/dev/null 2>&1; then
  "$PTSCOPE" analyze "$SWEEP_OUT" || status=1
fi
exit $status

#!/usr/bin/env bash
# Real trainers under `ptscope run` (issue 12): each records a small bundle with
# the facts its process measured (scripts/gpu/trainers/_common.py), checked by
# scripts/gpu/trainers/check.py (PASS/FAIL lines), analysed with
# `ptscope analyze --json`, and packed for testdata/bundles/. About 4 minutes on
# one H100; stops starting runs after DEADLINE seconds (default 430).
#
# Usage (the device tool; build the Linux binary here first):
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-linux-amd64 ./cmd/ptscope
#   scripts/gpu/trainers.sh [NAME...]      (default: all of them, in this order)
# NAMEs: hf_trainer accelerate lightning_roots lightning_manual ddp fsdp2 fsdp2_sim2
#        plain_accum_ckpt compiled oom oom_caught leak
# Environment: PTSCOPE (default bin/ptscope-linux-amd64, else bin/ptscope), PYTHON
# (python3), WORK (/tmp/ptscope-trainers), OUT ($WORK/out).
# $OUT gets trainers.log and trainers_N.tar (each at most 15 MB, holding one
# NAME.tar.gz per trainer: the bundle without .ptscope/, and NAME.analyze.json).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-trainers}
OUT=${OUT:-$WORK/out}
DEADLINE=${DEADLINE:-430}
rm -rf "$WORK"; mkdir -p "$WORK/b" "$WORK/pack" "$OUT"
if [ -z "${PTSCOPE:-}" ]; then
  for c in bin/ptscope-linux-amd64 bin/ptscope; do [ -x "$c" ] && PTSCOPE=$PWD/$c && break; done
fi
[ -n "${PTSCOPE:-}" ] || { echo "FAIL: no ptscope binary (build bin/ptscope-linux-amd64, see the header)"; exit 2; }
LOG=$OUT/trainers.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
T=scripts/gpu/trainers
say "== $(date -u +%FT%TZ) $($PYTHON -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' 2>&1) ptscope $("$PTSCOPE" version 2>/dev/null | head -1)"
say "   packages: $($PYTHON - <<'PY' 2>&1
import importlib
out = []
for m in ("transformers", "accelerate", "lightning", "pytorch_lightning", "timm"):
    try:
        out.append("%s %s" % (m, importlib.import_module(m).__version__))
    except Exception:
        out.append("%s missing" % m)
print(", ".join(out))
PY
)"

# trainer NAME EXIT LIMIT [ptscope flags] -- command...
trainer() {
  local name=$1 want=$2 limit=$3; shift 3
  local left=$((DEADLINE - SECONDS)) t0=$SECONDS
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 30 ]; then say "SKIP $name: time budget spent"; return; fi
  say "-- $name: ptscope run $*"
  timeout "$limit" "$PTSCOPE" run --quiet --out "$WORK/b/$name" "$@" >"$WORK/$name.out" 2>&1
  local rc=$?
  tail -n 3 "$WORK/$name.out" | sed 's/^/   | /' | tee -a "$LOG"
  say "   $name: exit $rc in $((SECONDS - t0)) s"
  cat "$WORK/$name.out" >>"$LOG"
  local b
  b=$(readlink -f "$WORK/b/$name/latest" 2>/dev/null)
  if [ -z "$b" ] || [ ! -d "$b" ]; then say "FAIL $name: no bundle"; return; fi
  "$PTSCOPE" analyze --json "$b" >"$WORK/pack/$name.analyze.json" 2>"$WORK/$name.analyze.err" ||
    say "   $name: analyze exit $? ($(head -c 300 "$WORK/$name.analyze.err"))"
  $PYTHON $T/check.py "$b" "$name" "$want" "$WORK/pack/$name.analyze.json" 2>&1 | tee -a "$LOG"
  tar czf "$WORK/pack/$name.tar.gz" --exclude=.ptscope -C "$(dirname "$b")" "$(basename "$b")"
  say "   $name: bundle $(du -sh "$b" | cut -f1), packed $(du -h "$WORK/pack/$name.tar.gz" | cut -f1)"
}

TORCHRUN="$PYTHON -m torch.distributed.run --standalone --nproc-per-node 1"
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(hf_trainer accelerate lightning_roots lightning_manual ddp fsdp2 fsdp2_sim2 plain_accum_ckpt compiled oom oom_caught leak)
for n in "${names[@]}"; do
  case $n in
    hf_trainer) trainer $n 0 150 --trace --schedule wait=1,warmup=1,active=2,repeat=1 -- $PYTHON $T/hf_trainer.py ;;
    accelerate) trainer $n 0 90 -- $PYTHON $T/accelerate_loop.py ;;
    lightning_roots) trainer $n 0 120 -- $PYTHON $T/lightning_roots.py ;;
    lightning_manual) trainer $n 0 120 -- $PYTHON $T/lightning_roots.py --manual ;;
    ddp) trainer $n 0 120 -- $TORCHRUN $T/ddp.py ;;
    fsdp2) trainer $n 0 120 -- $TORCHRUN $T/fsdp2.py ;;
    fsdp2_sim2) trainer $n 0 120 --simulate-world-size 2 -- $PYTHON $T/fsdp2.py ;;
    plain_accum_ckpt) trainer $n 0 90 -- $PYTHON $T/plain_accum_ckpt.py ;;
    compiled) trainer $n 0 180 -- $PYTHON $T/compiled.py ;;
    oom) trainer $n 1 90 -- $PYTHON $T/oom.py ;;
    oom_caught) trainer $n 0 90 -- $PYTHON $T/oom_caught.py ;;
    leak) trainer $n 0 90 -- $PYTHON $T/leak.py ;;
    *) say "FAIL $n: unknown trainer" ;;
  esac
done

# pack: trainers_N.tar files of at most 15 MB (the device tool returns files of up to 16 MB)
$PYTHON - "$WORK/pack" "$OUT" <<'PY' | tee -a "$LOG"
import os, sys, tarfile
src, out = sys.argv[1], sys.argv[2]
files = sorted(os.listdir(src))
groups, cur, size = [], [], 0
for f in files:
    n = os.path.getsize(os.path.join(src, f))
    if cur and size + n > 15 << 20:
        groups.append(cur); cur, size = [], 0
    cur.append(f); size += n
if cur:
    groups.append(cur)
for i, g in enumerate(groups, 1):
    p = os.path.join(out, "trainers_%d.tar" % i)
    with tarfile.open(p, "w") as t:
        for f in g:
            t.add(os.path.join(src, f), arcname=f)
    print("packed %s: %d files, %.1f MB" % (p, len(g), os.path.getsize(p) / 1e6))
PY
pass=$(grep -c '^PASS' "$LOG"); fail=$(grep -c '^FAIL' "$LOG")
say "== trainers: $pass checks passed, $fail failed, $SECONDS s"
[ "$fail" -eq 0 ]

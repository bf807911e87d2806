#!/usr/bin/env bash
# GPU checks of `ptscope run`'s robustness with real PyTorch (about 2 minutes, one GPU):
#
#   1. exit status as a shell's for real Python deaths (SIGSEGV 139, SIGABRT 134, after
#      CUDA is initialised) with nothing but ptscope's one line on stderr, and the
#      command's 3 under a closed pipe (`... 2>&1 | head -c1`);
#   2. a SIGTERM sent to the process group of `ptscope run -- python train.py` reaches
#      the CUDA training process once (a handler counts), one sent to ptscope alone once;
#   3. SIGKILL of ptscope during `torchrun --nproc-per-node 2` leaves no worker running
#      and frees their GPU memory;
#   4. HOME and XDG_CACHE_HOME unset: the companion goes to a private folder and the run
#      is captured; as root, a /tmp/ptscope-cache-0 planted by uid 65534 is never used;
#   5. start failures: 126 for a non-executable script, 127 for a bad #! interpreter with
#      the manifest finalised.
#
# Usage (build the Linux binary here first):
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-linux-amd64 ./cmd/ptscope
#   scripts/gpu/runsafe.sh                 (on the GPU machine; OUT gets runsafe.log)
# Environment: PTSCOPE (default bin/ptscope-linux-amd64), PYTHON (python3), TORCHRUN (next to
# PYTHON), WORK (/tmp/ptscope-runsafe), OUT ($WORK/out).
# Prints PASS/FAIL lines and exits 1 if any check failed.
set -u -o pipefail
cd "$(dirname "$0")/../.."
PTSCOPE=${PTSCOPE:-$PWD/bin/ptscope-linux-amd64}
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-runsafe}
OUT=${OUT:-$WORK/out}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
LOG=$OUT/runsafe.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
FAILS=0
check() { # name, condition result (0 = pass), detail
  if [ "$2" = 0 ]; then say "PASS $1"; else say "FAIL $1: $3"; FAILS=$((FAILS + 1)); fi
}
TRAIN=$PWD/scripts/gpu/runsafe_train.py
say "== $(date -u +%FT%TZ) $($PYTHON -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))') uid=$(id -u)"

waitfor() { # file, seconds[, pid that must stay alive meanwhile]
  local i=0
  while [ ! -e "$1" ] && [ $i -lt $(($2 * 20)) ]; do
    [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && return 1
    sleep 0.05; i=$((i + 1))
  done
  [ -e "$1" ]
}

# 1. exit status
for c in "SIGSEGV 139 import torch; torch.zeros(1, device='cuda'); import ctypes; ctypes.string_at(0)" \
         "SIGABRT 134 import torch; torch.zeros(1, device='cuda'); import os; os.abort()" \
         "exit3 3 import torch; torch.zeros(1, device='cuda'); raise SystemExit(3)"; do
  set -- $c; name=$1; want=$2; shift 2; code="$*"
  "$PTSCOPE" run --quiet --out "$WORK/runs" -- "$PYTHON" -c "$code" >"$WORK/$name.out" 2>"$WORK/$name.err"
  got=$?
  dump=$(grep -c -E 'goroutine |^PC=|SIGSEGV: segmentation' "$WORK/$name.err")
  check "exit status $name: $got" "$([ "$got" = "$want" ] && [ "$dump" = 0 ] && echo 0 || echo 1)" \
    "want $want, runtime dump lines $dump: $(tail -3 "$WORK/$name.err" | tr '\n' '|')"
done
"$PTSCOPE" run --out "$WORK/runs" -- "$PYTHON" -c "import sys, time; time.sleep(0.5); sys.exit(3)" 2>&1 | head -c1 >/dev/null
got=${PIPESTATUS[0]}
check "closed pipe keeps the command's 3: $got" "$([ "$got" = 3 ] && echo 0 || echo 1)" "want 3"

# 2. group and single SIGTERM reach the training process once
for how in group single; do
  d=$WORK/sig_$how; mkdir -p "$d"
  setsid "$PTSCOPE" run --quiet --out "$d/runs" -- "$PYTHON" "$TRAIN" --ready "$d/ready" --count "$d/count" --gib 0.5 &
  pid=$!
  if waitfor "$d/ready.0" 120 "$pid"; then
    if [ $how = group ]; then kill -TERM -- -"$pid"; else kill -TERM "$pid"; fi
    wait "$pid"; rc=$?
    n=$(cat "$d/count.0" 2>/dev/null)
    sigs=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["signals"]))' "$d/runs/latest/manifest.json" 2>&1)
    check "SIGTERM to the $how reaches the training process once (count $n, exit $rc)" \
      "$([ "$n" = 1 ] && [ "$rc" = 0 ] && echo 0 || echo 1)" "manifest signals $sigs"
    say "   signals: $sigs"
  else
    kill -KILL -- -"$pid" 2>/dev/null; check "SIGTERM to the $how" 1 "training never became ready"
  fi
done

# 3. SIGKILL of ptscope during torchrun
d=$WORK/kill; mkdir -p "$d"
if [ -z "${TORCHRUN:-}" ]; then
  TORCHRUN=$(dirname "$(command -v "$PYTHON")")/torchrun
  [ -x "$TORCHRUN" ] || TORCHRUN="$PYTHON -m torch.distributed.run"
fi
setsid "$PTSCOPE" run --quiet --out "$d/runs" -- $TORCHRUN --standalone --nproc-per-node 2 "$TRAIN" --ready "$d/ready" --count "$d/count" --gib 2 --after 1 &
pid=$!
if waitfor "$d/ready.0" 180 "$pid" && waitfor "$d/ready.1" 60 "$pid"; then
  w0=$(cat "$d/ready.0"); w1=$(cat "$d/ready.1")
  before=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c -w -e "$w0" -e "$w1")
  kill -KILL "$pid"; t0=$(date +%s.%N)
  left=2
  for i in $(seq 200); do
    left=0
    for w in $w0 $w1; do
      st=$(awk '{print $3}' /proc/$w/stat 2>/dev/null)
      [ -n "$st" ] && [ "$st" != Z ] && left=$((left + 1))
    done
    [ $left = 0 ] && break
    sleep 0.1
  done
  took=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
  sleep 1
  after=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c -w -e "$w0" -e "$w1")
  check "SIGKILL of ptscope ends torchrun's workers ($left left after ${took}s; GPU processes $before -> $after)" \
    "$([ $left = 0 ] && [ "$after" = 0 ] && echo 0 || echo 1)" "workers $w0 $w1"
  for w in $w0 $w1; do kill -KILL "$w" 2>/dev/null; done
else
  kill -KILL -- -"$pid" 2>/dev/null; check "SIGKILL of ptscope during torchrun" 1 "workers never became ready"
fi
pkill -KILL -f "$TRAIN" 2>/dev/null

# 4. no HOME: a private companion folder; a planted one is never used
d=$WORK/nohome; mkdir -p "$d"
cache=/tmp/ptscope-cache-$(id -u)
rm -rf "$cache"
env -u HOME -u XDG_CACHE_HOME "$PTSCOPE" run --quiet --out "$d/runs" -- "$PYTHON" "$TRAIN" --ready "$d/ready" --count "$d/count" --seconds 2 --gib 0.1 2>"$d/err"
rc=$?
mode=$(stat -c '%a %u' "$cache" 2>/dev/null)
ranks=$(ls -d "$d"/runs/latest/rank0 2>/dev/null | wc -l)
check "no HOME: captured (exit $rc, rank0 $ranks), cache $cache mode/owner '$mode'" \
  "$([ $rc = 0 ] && [ "$ranks" = 1 ] && [ "$mode" = "700 $(id -u)" ] && echo 0 || echo 1)" "$(tail -2 "$d/err" | tr '\n' '|')"
if [ "$(id -u)" = 0 ]; then
  rm -rf "$cache"; mkdir -p "$cache"
  # the folder name this ptscope would use: companion-<hash>
  hash=$("$PTSCOPE" run --quiet --out "$d/runs2" -- "$PYTHON" -c 'import os; print(os.path.basename(os.environ["PYTHONPATH"].split(":")[0]))' 2>/dev/null)
  rm -rf "$cache"; mkdir -p "$cache/$hash/ptscope_companion"
  echo "open('$d/planted_ran', 'w').write('x')" >"$cache/$hash/sitecustomize.py"
  chown -R 65534:65534 "$cache"; chmod 755 "$cache"
  env -u HOME -u XDG_CACHE_HOME "$PTSCOPE" run --out "$d/runs3" -- "$PYTHON" "$TRAIN" --ready "$d/ready3" --count "$d/count3" --seconds 2 --gib 0.1 2>"$d/err3"
  rc=$?
  ranks=$(ls -d "$d"/runs3/latest/rank0 2>/dev/null | wc -l)
  warned=$(grep -c "companion cache not used" "$d/err3")
  check "planted /tmp cache of uid 65534 never used (exit $rc, rank0 $ranks, warned $warned)" \
    "$([ $rc = 0 ] && [ "$ranks" = 1 ] && [ "$warned" = 1 ] && [ ! -e "$d/planted_ran" ] && echo 0 || echo 1)" "$(tail -3 "$d/err3" | tr '\n' '|')"
  rm -rf "$cache"
else
  say "SKIP planted cache (not root)"
fi

# 5. start failures
d=$WORK/start; mkdir -p "$d"
printf '#!/bin/sh\necho hi\n' >"$d/noexec.sh"; chmod 644 "$d/noexec.sh"
printf '#!/no/such/interpreter\n' >"$d/badinterp"; chmod 755 "$d/badinterp"
"$PTSCOPE" run --quiet --out "$d/runs" -- "$d/noexec.sh" 2>"$d/err1"; rc1=$?
"$PTSCOPE" run --quiet --out "$d/runs" -- "$d/badinterp" 2>"$d/err2"; rc2=$?
status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$d/runs/latest/manifest.json" 2>&1)
check "start failures: not executable $rc1, bad interpreter $rc2, manifest '$status'" \
  "$([ $rc1 = 126 ] && [ $rc2 = 127 ] && [ "$status" = failed_to_start ] && echo 0 || echo 1)" "$(cat "$d/err1" "$d/err2" | tr '\n' '|')"

say "== $FAILS failed"
[ $FAILS = 0 ]

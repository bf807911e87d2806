#!/usr/bin/env bash
# Issue 12 (trace side) on real PyTorch traces: records small traces whose
# facts are known in the process and checks what `ptscope trace` says about
# them. Prints one PASS/FAIL line per check; results and traces under $OUT.
#
#   scripts/gpu/trace_checks.sh            # about 2 minutes on one H100/H200
#
#   noschedule  a trace recorded without prof.step() around 3 optimizer steps
#               -> step_source optimizer_step, 3 steps
#   ddp1        DDP at world size 1 with the NCCL backend
#               -> no use-nccl finding, backend nccl, world size 1
#   dataloader  a slow single-process DataLoader, the loop timing __next__
#               -> dataloader_ratio within 3 points of the share timed in the
#                  process; breakdown == phases; check --max-dataloader says it
#   overhead    ptscope run --trace around examples/transformer_lm.py
#               -> profiling_overhead measured, the profiling-overhead finding
#   fsdp        (2 GPUs or more) ptscope run --trace around torchrun FSDP2
#               -> per rank utilisation + idle = 1, NCCL not compute, idle
#                  split with communication wait; cross-rank section
#
# Environment: PTSCOPE (binary; default bin/ptscope-linux-amd64, else go
# build), PYTHON (default python3), OUT (default /tmp/ptscope-trace-checks).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/ptscope-trace-checks}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
if [ -z "${PTSCOPE:-}" ]; then
  for c in bin/ptscope-linux-amd64 bin/ptscope; do [ -x "$c" ] && PTSCOPE=$PWD/$c && break; done
fi
if [ -z "${PTSCOPE:-}" ]; then
  go build -o "$WORK/ptscope" ./cmd/ptscope || { echo "FAIL: no ptscope binary (set PTSCOPE)"; exit 2; }
  PTSCOPE=$WORK/ptscope
fi
FAIL=0
LOG=$OUT/trace_checks.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }

# verdict.py CASE REPORT.json [FACTS.json]: PASS/FAIL lines for one case
cat >"$WORK/verdict.py" <<'PY'
import json, sys
case, rep = sys.argv[1], json.load(open(sys.argv[2]))
facts = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else {}
bad = []
def check(ok, what):
    print(("PASS" if ok else "FAIL") + ": " + case + ": " + what)
    if not ok: bad.append(what)
ranks = rep["ranks"]
ids = lambda r: [f["id"] for f in r["findings"]]
for r in ranks:
    for s in r["steps"]:
        b = sum(s["breakdown"].values()); p = sum(s["phases"].values())
        if b != s["duration_ns"] or p != s["duration_ns"] or s["breakdown"]["dataloader_ns"] != s["phases"]["data_loading_ns"]:
            check(False, "rank %d %s: breakdown %d, phases %d, duration %d" % (r["rank"], s["name"], b, p, s["duration_ns"]))
    u, i = r["gpu_utilization_ratio"], r["idle"]["idle_ratio"]
    check(abs(u + i - 1) < 1e-9 or not r["gpus"], "rank %d: utilization %.4f + idle %.4f = 1" % (r["rank"], u, i))
r = ranks[0]
if case == "noschedule":
    check(r["step_source"] == "optimizer_step", "step_source %s (want optimizer_step)" % r["step_source"])
    check(len(r["steps"]) == facts["optimizer_steps"], "%d steps (in the process: %d optimizer steps)" % (len(r["steps"]), facts["optimizer_steps"]))
elif case == "ddp1":
    check("use-nccl" not in ids(r), "no use-nccl finding at world size 1 (findings %s)" % ids(r))
    check(r.get("backend") == facts["backend"] and r.get("world_size") == 1, "backend %s world size %s (in the process: %s, 1)" % (r.get("backend"), r.get("world_size"), facts["backend"]))
    check(len(r["steps"]) == facts["active_steps"], "%d steps (active %d)" % (len(r["steps"]), facts["active_steps"]))
elif case == "dataloader":
    want, got = facts["dataloader_share_in_process"], r["dataloader_ratio"]
    print("info: dataloader: share %.4f, host share %.4f, in the process %.4f; step %.2f ms, in the process %.2f ms" % (
        got, r["host_dataloader_ratio"], want, r["average_step_ns"] / 1e6, facts["step_s_in_process"] * 1e3))
    check(abs(got - want) < 0.03, "dataloader_ratio %.4f within 3 points of the in-process share %.4f" % (got, want))
    check(len(r["steps"]) == facts["active_steps"], "%d steps (active %d)" % (len(r["steps"]), facts["active_steps"]))
    check("dataloader" in ids(r), "a dataloader finding (%s)" % ids(r))
elif case == "overhead":
    o = r.get("profiling_overhead")
    check(o is not None, "profiling_overhead measured from the bundle's phases")
    if o:
        print("info: overhead: profiled %.2f ms, unprofiled %.2f ms (steps %s), slowdown %.1f%%" % (
            o["profiled_step_ns"] / 1e6, o["unprofiled_step_ns"] / 1e6, o["unprofiled_steps"], 100 * o["slowdown_ratio"]))
        check(("profiling-overhead" in ids(r)) == (o["slowdown_ratio"] >= 0.10), "profiling-overhead finding iff slowdown >= 10%")
elif case == "fsdp":
    check(len(ranks) >= 2 and rep.get("cross_rank") is not None, "%d ranks and a cross-rank section" % len(ranks))
    for r in ranks:
        i = r["idle"]
        print("info: fsdp rank %d: utilization %.3f, idle %.3f (communication %.3f, host %.3f, copies %.3f, kernel %.3f, other %.3f of the steps); %d NCCL kernels" % (
            r["rank"], r["gpu_utilization_ratio"], i["idle_ratio"], i["communication_wait_ns"] / i["span_ns"], i["host_wait_ns"] / i["span_ns"],
            i["copy_wait_ns"] / i["span_ns"], i["kernel_wait_ns"] / i["span_ns"], i["other_wait_ns"] / i["span_ns"], r["communication"]["kernels"]))
        check(r["communication"]["kernels"] > 0, "rank %d: NCCL kernels found" % r["rank"])
        busy = r["gpu_utilization_ratio"] + i["communication_wait_ns"] / i["span_ns"]
        check(busy <= 1 + 1e-9, "rank %d: compute and communication-only time do not overlap (%.4f)" % (r["rank"], busy))
sys.exit(1 if bad else 0)
PY

run_case() { # CASE: record with trace_checks.py, analyse, judge
  local c=$1
  if ! $PYTHON scripts/gpu/trace_checks.py "$OUT" "$c" >>"$LOG" 2>&1; then
    say "FAIL: $c: recording failed (see $LOG)"; FAIL=1; return
  fi
  "$PTSCOPE" trace --json "$OUT/$c.pt.trace.json" >"$OUT/$c.report.json" 2>>"$LOG" || { say "FAIL: $c: ptscope trace exit $?"; FAIL=1; return; }
  COLUMNS=100 "$PTSCOPE" trace "$OUT/$c.pt.trace.json" >"$OUT/$c.report.txt" 2>>"$LOG"
  $PYTHON "$WORK/verdict.py" "$c" "$OUT/$c.report.json" "$OUT/$c.facts.json" | tee -a "$LOG" || FAIL=1
}

for c in noschedule ddp1 dataloader; do run_case "$c"; done

# check --max-dataloader reports the same share as trace
if [ -f "$OUT/dataloader.report.json" ]; then
  share=$($PYTHON -c 'import json,sys; print("%.1f%%" % (100 * json.load(open(sys.argv[1]))["ranks"][0]["dataloader_ratio"]))' "$OUT/dataloader.report.json")
  line=$("$PTSCOPE" check --max-dataloader 99% "$OUT/dataloader.pt.trace.json" 2>&1)
  if echo "$line" | grep -q "DataLoader $share of the step"; then say "PASS: dataloader: check says $share as trace does"; else say "FAIL: dataloader: check says '$line', trace $share"; FAIL=1; fi
fi

# the profiler's own overhead, measured against the bundle's unprofiled steps
if "$PTSCOPE" run --trace --out "$WORK/runs" --name overhead -- $PYTHON examples/transformer_lm.py \
     --model-size small --context-length 512 --batch-size 8 --mixed-precision bf16 --steps 12 --warmup 2 >>"$LOG" 2>&1; then
  "$PTSCOPE" trace --json "$WORK/runs/latest" >"$OUT/overhead.report.json" 2>>"$LOG"
  COLUMNS=100 "$PTSCOPE" trace "$WORK/runs/latest" >"$OUT/overhead.report.txt" 2>>"$LOG"
  $PYTHON "$WORK/verdict.py" overhead "$OUT/overhead.report.json" | tee -a "$LOG" || FAIL=1
else
  say "FAIL: overhead: ptscope run failed (see $LOG)"; FAIL=1
fi

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -ge 2 ]; then
  if "$PTSCOPE" run --trace --out "$WORK/runs" --name fsdp -- torchrun --nproc-per-node 2 examples/transformer_lm.py \
       --fsdp --model-size small --context-length 512 --batch-size 8 --mixed-precision bf16 --steps 10 --warmup 2 >>"$LOG" 2>&1; then
    "$PTSCOPE" trace --json "$WORK/runs/latest" >"$OUT/fsdp.report.json" 2>>"$LOG"
    COLUMNS=100 "$PTSCOPE" trace "$WORK/runs/latest" >"$OUT/fsdp.report.txt" 2>>"$LOG"
    $PYTHON "$WORK/verdict.py" fsdp "$OUT/fsdp.report.json" | tee -a "$LOG" || FAIL=1
  else
    say "FAIL: fsdp: ptscope run torchrun failed (see $LOG)"; FAIL=1
  fi
else
  say "SKIP: fsdp: needs 2 GPUs ($gpus here)"
fi
say "trace checks: $([ $FAIL = 0 ] && echo PASS || echo FAIL)"
exit $FAIL

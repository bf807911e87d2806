#!/usr/bin/env bash
# End-to-end check of `ptscope run` with real PyTorch on a CUDA machine.
#
#   scripts/gpu-e2e.sh [single] [signal] [oom] [compile] [overhead] [ddp] [sweep] [precision]   (default: all)
#
# Environment:
#   PTSCOPE  ptscope binary (default: bin/ptscope-linux-amd64, else bin/ptscope, else `go build`)
#   WORK     scratch folder for bundles (default /tmp/ptscope-e2e)
#   OUT      where small artifacts are copied (the device tool's $OUT; default $WORK/out)
#   PYTHON   python with torch (default python3)
#   SWEEP_SIZES, SWEEP_CONTEXTS  override the sweep's sizes and context lengths
# Needs: 1 GPU for single/signal/oom/overhead/sweep, 2 GPUs for ddp.
set -u -o pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-e2e}
OUT=${OUT:-$WORK/out}
mkdir -p "$WORK" "$OUT"
if [ -z "${PTSCOPE:-}" ]; then
  for c in bin/ptscope-linux-amd64 bin/ptscope; do [ -x "$c" ] && PTSCOPE=$PWD/$c && break; done
fi
if [ -z "${PTSCOPE:-}" ]; then
  go build -o "$WORK/ptscope" ./cmd/ptscope || { echo "no ptscope binary (set PTSCOPE)"; exit 2; }
  PTSCOPE=$WORK/ptscope
fi
export PTSCOPE PYTHON
LOG=$OUT/e2e.log
: >"$LOG"
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(single signal oom compile overhead ddp sweep precision)
FAIL=0
say() { echo "$*" | tee -a "$LOG"; }
fail() { say "FAIL: $*"; FAIL=1; }
ok() { say "ok: $*"; }
LM=examples/transformer_lm.py

# check.py BUNDLE: prints the bundle listing and the key numbers; exit 1 when a
# required artifact is missing (flags: need=snapshot,trace,phases,live,oom ranks=N)
cat >"$WORK/check.py" <<'PY'
import gzip, json, os, pickle, sys, collections
b = sys.argv[1]; need = set(); ranks = None
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    if k == "need": need = set(v.split(","))
    if k == "ranks": ranks = int(v)
m = json.load(open(os.path.join(b, "manifest.json")))
bad = []
print("bundle", b)
print("  manifest: device=%r total=%d torch=%s cuda=%s world_size=%d exit=%d status=%s warnings=%s" % (
    m["device_name"], m["device_total_memory_bytes"], m["torch_version"], m["cuda_version"], m["world_size"],
    m["exit_code"], m["status"], m["warnings"]))
for root, dirs, files in os.walk(b):
    dirs[:] = [d for d in dirs if not d.startswith(".")]
    for f in sorted(files):
        p = os.path.join(root, f)
        print("  %10d  %s" % (os.path.getsize(p), os.path.relpath(p, b)))
rdirs = sorted(d for d in os.listdir(b) if d.startswith("rank"))
if ranks is not None and len(rdirs) != ranks: bad.append("want %d rank folders, have %s" % (ranks, rdirs))
for rd in rdirs:
    d = os.path.join(b, rd)
    pj = json.load(open(os.path.join(d, "process.json"))) if os.path.exists(os.path.join(d, "process.json")) else {}
    print("  %s: steps=%s max_allocated=%s max_reserved=%s max_device_used=%s rss=%s features=%s" % (
        rd, pj.get("steps"), pj.get("max_allocated_bytes"), pj.get("max_reserved_bytes"),
        pj.get("max_device_used_bytes"), pj.get("max_host_rss_bytes"), pj.get("features")))
    snaps = sorted(f for f in os.listdir(d) if f.startswith("snapshot_"))
    for s in snaps:
        snap = pickle.load(open(os.path.join(d, s), "rb"))
        tr = [e for dev in snap.get("device_traces", []) for e in dev]
        acts = collections.Counter(e["action"] for e in tr)
        ann = collections.Counter(a.get("name") for a in snap.get("external_annotations", []))
        meta = collections.Counter(e.get("user_metadata") for e in tr if e.get("user_metadata"))
        print("    %s: segments=%d trace_entries=%d actions=%s annotations=%s module_metadata_entries=%d top_modules=%s" % (
            s, len(snap.get("segments", [])), len(tr), dict(acts), dict(ann), sum(meta.values()), meta.most_common(4)))
    if "snapshot" in need and not snaps: bad.append(rd + ": no snapshot")
    if "oom" in need and "snapshot_oom.pickle" not in snaps: bad.append(rd + ": no OOM snapshot")
    traces = sorted(f for f in os.listdir(d) if ".pt.trace.json" in f)
    for t in traces:
        op = gzip.open if t.endswith(".gz") else open
        ev = json.load(op(os.path.join(d, t), "rt")).get("traceEvents", [])
        names = collections.Counter(e.get("name") for e in ev if str(e.get("name", "")).startswith(("ptscope:", "ProfilerStep")))
        print("    %s: events=%d %s" % (t, len(ev), dict(names)))
    if "trace" in need and not traces: bad.append(rd + ": no trace")
    ph = [json.loads(l) for l in open(os.path.join(d, "phases.jsonl"))] if os.path.exists(os.path.join(d, "phases.jsonl")) else []
    cnt = collections.Counter(p["phase"] for p in ph)
    print("    phases.jsonl: %d records %s" % (len(ph), dict(cnt)))
    for p in ph[:3] + ph[-3:]:
        print("      step %d %-9s alloc %d -> %d  reserved %d -> %d  max_after %d  %.2f ms" % (
            p["step"], p["phase"], p["allocated_before_bytes"], p["allocated_after_bytes"], p["reserved_before_bytes"],
            p["reserved_after_bytes"], p["max_allocated_after_bytes"], (p["end_time_us"] - p["start_time_us"]) / 1e3))
    if "phases" in need and not ({"forward", "backward", "optimizer"} <= set(cnt)): bad.append(rd + ": phases missing: %s" % dict(cnt))
    lv = [json.loads(l) for l in open(os.path.join(d, "live.jsonl"))] if os.path.exists(os.path.join(d, "live.jsonl")) else []
    print("    live.jsonl: %d samples; last=%s" % (len(lv), lv[-1] if lv else None))
    if "live" in need and len(lv) < 2: bad.append(rd + ": fewer than 2 live samples")
for x in bad: print("  MISSING:", x)
sys.exit(1 if bad else 0)
PY

run_section() {
  case "$1" in
  single)
    say "== single GPU: ptscope run --trace (small, ctx 512, bf16)"
    "$PTSCOPE" run --out "$WORK/single" --trace --schedule wait=1,warmup=1,active=2,repeat=1 --snapshot-at end,step:3 -- \
      "$PYTHON" $LM --model-size small --context-length 512 --batch-size 8 --mixed-precision bf16 --steps 6 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || fail "single: exit $rc"
    "$PYTHON" "$WORK/check.py" "$WORK/single/latest" need=snapshot,trace,phases,live ranks=1 2>&1 | tee -a "$LOG" && ok single || fail single
    b=$(readlink -f "$WORK/single/latest")
    cp "$b/rank0/snapshot_end.pickle" "$OUT/single_snapshot_end.pickle" 2>/dev/null
    t=$(ls "$b"/rank0/*.pt.trace.json.gz 2>/dev/null | head -1); [ -n "$t" ] && cp "$t" "$OUT/single_trace.pt.trace.json.gz"
    ;;
  signal)
    say "== SIGUSR1 to ptscope: snapshot in the running process; exit code passes through"
    "$PTSCOPE" run --out "$WORK/signal" --quiet -- "$PYTHON" $LM --model-size small --context-length 256 --steps 300 >>"$LOG" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
      l=$(ls "$WORK"/signal/latest/rank0/live.jsonl 2>/dev/null) && [ -n "$l" ] && [ "$(tail -1 "$l" | "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read() or "{}").get("step",0))' 2>/dev/null || echo 0)" -ge 3 ] && break
      sleep 0.5
    done
    kill -USR1 $pid; sleep 3; wait $pid; rc=$?
    [ "$rc" = 0 ] || fail "signal: exit $rc"
    ls "$WORK"/signal/latest/rank0/ | tee -a "$LOG"
    ls "$WORK"/signal/latest/rank0/snapshot_signal1_step*.pickle >/dev/null 2>&1 && ok "SIGUSR1 snapshot" || fail "no SIGUSR1 snapshot"
    "$PTSCOPE" run --out "$WORK/signal" --quiet -- "$PYTHON" -c 'import os,signal; os.kill(os.getpid(), signal.SIGTERM)'
    rc=$?; [ "$rc" = 143 ] && ok "killed-by-SIGTERM passes through (143)" || fail "SIGTERM pass-through: got $rc"
    ;;
  oom)
    say "== OOM: xl, ctx 1024, batch 64 (does not fit 80 GB)"
    "$PTSCOPE" run --out "$WORK/oom" -- "$PYTHON" $LM --model-size xl --context-length 1024 --batch-size 64 --steps 1 --warmup 0 >"$WORK/oom.txt" 2>&1
    rc=$?; tail -5 "$WORK/oom.txt" | tee -a "$LOG"
    [ "$rc" = 1 ] && ok "OOM exit code 1 passed through" || fail "OOM run exit $rc (want 1)"
    "$PYTHON" "$WORK/check.py" "$WORK/oom/latest" need=oom ranks=1 2>&1 | tee -a "$LOG" && ok oom || fail oom
    cat "$WORK"/oom/latest/rank0/oom.json | tee -a "$LOG"; echo | tee -a "$LOG"
    f="$WORK/oom/latest/rank0/snapshot_oom.pickle"; [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 16000000 ] && cp "$f" "$OUT/oom_snapshot.pickle"
    ;;
  overhead)
    say "== step-time overhead (small, ctx 1024, batch 8, bf16, AdamW; median of 20 steps)"
    args=(--model-size small --context-length 1024 --batch-size 8 --mixed-precision bf16 --steps 20 --warmup 2)
    med() { "$PYTHON" -c 'import json,sys,statistics as s; t=json.load(open(sys.argv[1]))["step_times_ms"]; print("%.3f" % s.median(t))' "$1"; }
    "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_off.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" --memory=false --phases=false --modules=false --snapshot-at none -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_live.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_hist.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" --phases=false --modules=false -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_hist_only.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" --memory=false --snapshot-at none -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_hooks_only.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" --stacks all -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_hist_all.json" >/dev/null 2>&1
    "$PTSCOPE" run --quiet --out "$WORK/ov" --trace --schedule wait=0,warmup=2,active=21,repeat=1 -- "$PYTHON" $LM "${args[@]}" --json-out "$WORK/ov_trace.json" >/dev/null 2>&1
    off=$(med "$WORK/ov_off.json")
    for m in off live hooks_only hist_only hist hist_all trace; do
      v=$(med "$WORK/ov_$m.json" 2>/dev/null || echo nan)
      say "$(printf '  %-9s median step %8s ms  (%s)' "$m" "$v" "$("$PYTHON" -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print("%+.1f%%" % ((a/b-1)*100))' "$v" "$off" 2>/dev/null)")"
    done
    say "  modes: off = plain python; live = companion with samples only; hooks_only = phases + module metadata, no history;"
    say "         hist_only = memory history (python stacks) without phases/modules; hist = default (history, phases, modules);"
    say "         hist_all = --stacks all; trace = default + --trace with every measured step active (profile_memory, record_shapes)"
    ;;
  ddp)
    say "== 2-GPU torchrun (FSDP2): one bundle holding both ranks, then --ranks 0"
    "$PTSCOPE" run --out "$WORK/ddp" --trace --schedule wait=1,warmup=1,active=1,repeat=1 -- \
      torchrun --standalone --nproc-per-node 2 $LM --fsdp --model-size medium --context-length 512 --batch-size 4 --steps 4 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || fail "ddp: exit $rc"
    "$PYTHON" "$WORK/check.py" "$WORK/ddp/latest" need=snapshot,trace,phases,live ranks=2 2>&1 | tee -a "$LOG" && ok "ddp both ranks" || fail ddp
    "$PTSCOPE" run --quiet --out "$WORK/ddp" --ranks 0 -- torchrun --standalone --nproc-per-node 2 $LM --fsdp --model-size small --steps 2 >>"$LOG" 2>&1
    "$PYTHON" "$WORK/check.py" "$WORK/ddp/latest" ranks=1 >>"$LOG" 2>&1 && ok "--ranks 0 captured one rank" || fail "--ranks 0"
    ;;
  compile)
    say "== torch.compile(fullgraph=True) model under ptscope run: global hooks must not break the graph"
    cat >"$WORK/compiled.py" <<'PY'
import torch, torch.nn as nn
m = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).cuda()
opt = torch.optim.AdamW(m.parameters())
cm = torch.compile(m, fullgraph=True)
x = torch.randn(64, 512, device="cuda")
for _ in range(5):
    cm(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("compiled ok")
PY
    "$PTSCOPE" run --out "$WORK/compile" -- "$PYTHON" "$WORK/compiled.py" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] && ok "compile run exit 0" || fail "compile run exit $rc"
    "$PYTHON" "$WORK/check.py" "$WORK/compile/latest" need=snapshot,phases,live ranks=1 2>&1 | tee -a "$LOG" && ok compile || fail compile
    ;;
  sweep)
    say "== sweep: ${SWEEP_SIZES:-small medium} x ctx ${SWEEP_CONTEXTS:-256 512 1024} x fp32/bf16 x forward/training"
    SIZES="${SWEEP_SIZES:-small medium}" CONTEXTS="${SWEEP_CONTEXTS:-256 512 1024}" SWEEP_OUT="$WORK/sweep" PTSCOPE="$PTSCOPE" PYTHON="$PYTHON" \
      bash examples/memory_sweep.sh 2>&1 | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" = 0 ] && ok sweep || fail sweep
    ;;
  precision)
    say "== precision facts and the fp32-compute finding: small, ctx 512, fp32 vs bf16 autocast"
    for prec in none bf16; do
      "$PTSCOPE" run --out "$WORK/prec_$prec" --quiet -- "$PYTHON" $LM --model-size small --context-length 512 --batch-size 8 \
        --mixed-precision $prec --steps 3 >>"$LOG" 2>&1 || fail "precision $prec: exit $?"
      b=$(readlink -f "$WORK/prec_$prec/latest")
      cp "$b/rank0/process.json" "$OUT/precision_${prec}_process.json" 2>/dev/null
      "$PYTHON" -c 'import json,sys; print("  %s precision:" % sys.argv[2], json.load(open(sys.argv[1])).get("precision"))' "$b/rank0/process.json" "$prec" | tee -a "$LOG"
      "$PTSCOPE" analyze "$b" | grep -A2 "fp32-compute" | tee -a "$LOG"
      n=$("$PTSCOPE" analyze --json "$b" | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(sum(f["id"] == "fp32-compute" for i in d["inputs"] for v in i["devices"] for f in v["findings"]))')
      if [ "$prec" = none ]; then
        [ "$n" -ge 1 ] && ok "fp32-compute on the fp32 run" || fail "no fp32-compute finding on the fp32 run"
      else
        [ "$n" = 0 ] && ok "no fp32-compute on the bf16 run" || fail "fp32-compute on the bf16 run"
      fi
    done
    ;;
  *) fail "unknown section $1" ;;
  esac
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>&1 | tee -a "$LOG"
for s in "${sections[@]}"; do run_section "$s"; done
tar -C "$WORK" --exclude='*.pickle' --exclude='*.trace.json*' -czf "$OUT/bundles_small.tgz" \
  $(cd "$WORK" && ls -d single signal oom compile ov ddp sweep 2>/dev/null) 2>/dev/null
[ "$FAIL" = 0 ] && say "ALL OK" || say "SOME CHECKS FAILED"
exit $FAIL

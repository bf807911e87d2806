#!/usr/bin/env bash
# Step-time overhead of `ptscope run` as users see it (issue 15): two unmodified
# training runs, each with and without ptscope, interleaved (every repetition
# runs every capture option in turn), printing per option the median step time,
# the mean step time and the whole run's time, and their ratio to no capture.
#
#   hf   scripts/gpu/overhead_hf.py: Hugging Face Trainer, Llama hidden 1024,
#        8 layers, bf16, batch 8 x 512, 150 steps, 2 data-loader workers, random
#        init: CPU-bound (~25 ms steps on an H100, the GPU mostly idle);
#        "run" is the Trainer's train_runtime
#   lm   examples/transformer_lm.py: GPT-2 small shape, context 1024, batch 8,
#        bf16, AdamW, 3 warm-up + 40 measured steps: GPU-bound (~41 ms steps);
#        "run" is the sum of the measured steps
#
# Capture options (CONFIGS, default "off default all trace"); the parts of the
# default, one at a time, for a breakdown of what it costs:
#   off        plain python, no ptscope
#   floor      the companion with live samples and the OOM observer only
#              (--memory=false --phases=false --modules=false --snapshot-at none;
#              "live" is the same)
#   hooks      phases and module metadata, no allocator history (--memory=false
#              --snapshot-at none): the global module hooks and step bookkeeping
#   nomodules  the default without module metadata (--modules=false: module
#              hooks remain, for the phases)
#   history    allocator history for the whole run, without stacks and
#              without hooks (--history run --phases=false --modules=false
#              --stacks none)
#   histrun    the default with the history for the whole run (--history
#              run: stacks in windows, the earlier default)
#   none       the default without any Python stack (--stacks none)
#   nolive     the default without the live sampler (--interval 1h)
#   default    ptscope run with its defaults (history and stacks in windows
#              of steps, each window its own snapshot)
#   all        --record-steps all: a stack with every allocation of every step
#   trace      default + --trace --schedule wait=20,warmup=2,active=10,repeat=1
#              (the profiler without shapes or memory events, --trace's
#              default); the table adds the median of the 10 profiled steps
#              against the same steps without capture. trace_light is the same.
#   trace_full trace with --record-shapes --profile-memory (the earlier default)
# Each ptscope run prints how many of its steps recorded stacks, and how many
# module calls ran the companion's module hooks (global hooks in the first
# step and in stacked steps, the roots' own hooks elsewhere). Read as
# differences: floor - off (the companion loaded, its sampler), hooks - floor
# (module hooks and phase bookkeeping), none - hooks (allocator history
# without stacks), default - none (the stack windows).
# e.g. one breakdown run of about 7 minutes on an H100:
#   CONFIGS="off floor hooks history none default trace trace_full" WORKLOADS=hf REPS=2 HF_STEPS=100
# The decisive run for issue 15 (about 4 minutes on an H100):
#   CONFIGS="off hooks default" WORKLOADS="hf lm" REPS=2 HF_STEPS=100 scripts/gpu/overhead.sh
# Where the allocator history's own cost is in question (history - off: the
# C++ history with no hooks and no phases; none - history: the hooks and
# phase bookkeeping with history on), about 5 minutes:
#   CONFIGS="off history none default" WORKLOADS=hf REPS=3 HF_STEPS=100 DEADLINE=330 scripts/gpu/overhead.sh
# Goal: default within 3% of off on both workloads (the median, over the
# interleaved pairs, of the ratio of median step times; scripts/overhead_pool.py).
#
# Usage (the device tool; build the Linux binary here first):
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-linux-amd64 ./cmd/ptscope
#   scripts/gpu/overhead.sh                (about 7 minutes on one H100)
# Environment: PTSCOPE, PYTHON (python3), WORK (/tmp/ptscope-overhead), OUT
# ($WORK/out; gets overhead.log and overhead.json), REPS (3), CONFIGS, WORKLOADS
# ("hf lm"), HF_STEPS (150), LM_STEPS (40), DEADLINE (450 s: no run starts after it).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-overhead}
OUT=${OUT:-$WORK/out}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-off default all trace}
WORKLOADS=${WORKLOADS:-hf lm}
HF_STEPS=${HF_STEPS:-150}
LM_STEPS=${LM_STEPS:-40}
DEADLINE=${DEADLINE:-450}
rm -rf "$WORK"; mkdir -p "$WORK/res" "$OUT"
if [ -z "${PTSCOPE:-}" ]; then
  for c in bin/ptscope-linux-amd64 bin/ptscope; do [ -x "$c" ] && PTSCOPE=$PWD/$c && break; done
fi
[ -n "${PTSCOPE:-}" ] || { echo "FAIL: no ptscope binary (build bin/ptscope-linux-amd64, see the header)"; exit 2; }
LOG=$OUT/overhead.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
say "== $(date -u +%FT%TZ) overhead: reps=$REPS configs=($CONFIGS) workloads=($WORKLOADS)"
say "   machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $($PYTHON -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' 2>&1), $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
say "   ptscope $("$PTSCOPE" version 2>/dev/null | head -1)"
if [[ " $WORKLOADS " == *" hf "* ]] && ! $PYTHON -c 'import transformers' 2>/dev/null; then
  say "SKIP hf: transformers is not installed"; WORKLOADS=${WORKLOADS//hf/}
fi

TRACE_SCHED=wait=20,warmup=2,active=10,repeat=1
flags() {
  case $1 in
    off) ;;
    default) echo "--quiet" ;;
    all) echo "--quiet --record-steps all" ;;
    trace|trace_light) echo "--quiet --trace --schedule $TRACE_SCHED --profile-memory=false --record-shapes=false" ;;
    trace_full) echo "--quiet --trace --schedule $TRACE_SCHED --profile-memory --record-shapes" ;;
    none) echo "--quiet --stacks none" ;;
    floor|live) echo "--quiet --memory=false --phases=false --modules=false --snapshot-at none" ;;
    hooks) echo "--quiet --memory=false --snapshot-at none" ;;
    nomodules) echo "--quiet --modules=false" ;;
    history) echo "--quiet --history run --phases=false --modules=false --stacks none" ;;
    histrun) echo "--quiet --history run" ;;
    nolive) echo "--quiet --interval 1h" ;;
  esac
}
cmd() {
  case $1 in
    hf) echo "$PYTHON scripts/gpu/overhead_hf.py --steps $HF_STEPS --json-out $2" ;;
    lm) echo "$PYTHON examples/transformer_lm.py --model-size small --context-length 1024 --batch-size 8 --mixed-precision bf16 --warmup 3 --steps $LM_STEPS --json-out $2" ;;
  esac
}
for rep in $(seq 1 "$REPS"); do
  for w in $WORKLOADS; do
    for c in $CONFIGS; do
      if [ "$SECONDS" -ge "$DEADLINE" ]; then say "SKIP $w/$c/$rep: time budget spent"; continue; fi
      res=$WORK/res/${w}_${c}_${rep}.json
      t0=$SECONDS
      load=$(cut -d' ' -f1 /proc/loadavg)
      if [ "$c" = off ]; then
        timeout 200 $(cmd "$w" "$res") >"$WORK/last.out" 2>&1
      else
        timeout 200 "$PTSCOPE" run $(flags "$c") --out "$WORK/bundles" -- $(cmd "$w" "$res") >"$WORK/last.out" 2>&1
      fi
      rc=$?
      stacked=""
      if [ "$c" != off ]; then
        stacked=$($PYTHON - "$WORK/bundles/latest" <<'PY' 2>/dev/null
import glob, json, os, sys
for p in sorted(glob.glob(os.path.join(sys.argv[1], "rank*", "process.json")))[:1]:
    d = json.load(open(p))
    n = sum(w["last_step"] - w["first_step"] + 1 for w in d.get("stack_windows") or [] if w["first_step"] >= 0)
    print(", stacked steps %d of %d (%s)" % (n, d.get("steps", 0), " ".join(
        "%s:%d-%d" % (w["reason"], w["first_step"], w["last_step"]) for w in d.get("stack_windows") or [])))
    h = d.get("module_hooks")
    if h:  # module calls that ran the companion's hooks (off PyTorch's fast path)
        print(", module hooks: %d calls, %.1f per step, global in %d steps, %d roots" % (
            h["calls"], h["calls"] / max(1, d.get("steps", 0)), h["global_steps"], h["roots"]))
    c = d.get("companion_calls")
    if c:  # what the companion asked of torch, per step (allocator stats without the 1/s live samples)
        n = max(1, d.get("steps", 0))
        print(", per step: %.1f allocator stats, %.1f record_function, %.1f phase records, %.2f backward root "
              "hooks, %.2f fraction queries; %d history switches, %d inventories, %d live samples" % (
                  (c["allocator_stats"] - c["live_samples"]) / n, c["record_function"] / n, c["phase_records"] / n,
                  c["backward_root_hooks"] / n, c["memory_fraction"] / n, c["history_switches"], c["inventories"],
                  c["live_samples"]))
PY
)
        stacked=${stacked//$'\n'/}
      fi
      say "   $w $c rep $rep: exit $rc, $((SECONDS - t0)) s wall, load before $load$stacked"
      [ "$rc" = 0 ] || tail -n 5 "$WORK/last.out" | sed 's/^/   | /' | tee -a "$LOG"
      rm -rf "$WORK/bundles"
    done
  done
done

$PYTHON - "$WORK/res" "$OUT/overhead.json" "$REPS" "$TRACE_SCHED" <<'PY' | tee -a "$LOG"
import json, os, statistics as st, sys
res, out, reps, sched = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
kv = dict(p.split("=") for p in sched.split(","))
# profiled steps of the trace arm: 1-based optimizer steps wait+warmup+1 .. +active
lo = int(kv["wait"]) + int(kv["warmup"]) + 1
hi = lo + int(kv["active"]) - 1
runs = {}
for f in sorted(os.listdir(res)):
    w, rest = f[:-5].split("_", 1)
    c, rep = rest.rsplit("_", 1)
    try:
        d = json.load(open(os.path.join(res, f)))
    except ValueError:
        continue
    runs.setdefault((w, c), []).append(d)

def step_index(w, i):
    # 1-based optimizer step of step_times_ms[i]
    return i + 2 if w == "hf" else i + 4  # hf: ends after step 1; lm: 3 warm-up steps first

summary = {}
for (w, c), ds in sorted(runs.items()):
    med = st.median(st.median(d["step_times_ms"]) for d in ds)
    mean = st.median(st.mean(d["step_times_ms"]) for d in ds)
    run = st.median((d.get("train_runtime_s") or sum(d["step_times_ms"]) / 1e3) for d in ds)
    cpus = [st.median(d["step_cpu_ms"]) for d in ds if d.get("step_cpu_ms")]
    prof = [t for d in ds for i, t in enumerate(d["step_times_ms"]) if lo <= step_index(w, i) <= hi]
    summary.setdefault(w, {})[c] = {"runs": len(ds), "median_step_ms": med, "mean_step_ms": mean, "run_s": run,
                                    "window_median_ms": st.median(prof) if prof else None,
                                    "cpu_step_ms": st.median(cpus) if cpus else None,
                                    "loadavg": [d.get("loadavg") for d in ds]}
for w, cs in summary.items():
    off = cs.get("off")
    print("== %s (median over %d interleaved runs of each run's median/mean step)" % (w, reps))
    print("   %-11s %12s %8s %12s %8s %10s %8s %12s %8s %22s" % ("capture", "median step", "vs off", "mean step", "vs off", "run", "vs off", "CPU/step", "vs off", "profiled steps vs off"))
    order = ["off", "floor", "live", "hooks", "history", "nomodules", "none", "nolive", "default", "all",
             "trace_light", "trace", "trace_full"]
    for c, s in sorted(cs.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99):
        r = lambda k: ("%+7.1f%%" % ((s[k] / off[k] - 1) * 100)) if off and off.get(k) else "        "
        pw = ""
        if c.startswith("trace") and off and s["window_median_ms"] and off["window_median_ms"]:
            pw = "%.2f vs %.2f ms (%+.1f%%)" % (s["window_median_ms"], off["window_median_ms"], (s["window_median_ms"] / off["window_median_ms"] - 1) * 100)
        cpu = ("%9.2f ms" % s["cpu_step_ms"]) if s.get("cpu_step_ms") else "%12s" % "-"
        print("   %-11s %9.2f ms %s %9.2f ms %s %8.2f s %s %s %s %22s" % (c, s["median_step_ms"], r("median_step_ms"), s["mean_step_ms"], r("mean_step_ms"), s["run_s"], r("run_s"), cpu, r("cpu_step_ms") if s.get("cpu_step_ms") else "        ", pw))
json.dump({"reps": reps, "trace_schedule": sched, "workloads": summary}, open(out, "w"), indent=1)
PY
tar czf "$OUT/res.tgz" -C "$WORK" res 2>/dev/null || true  # every run's step times, for a closer look
# repeat k of each option against repeat k of off, and the verdict on their
# median (scripts/overhead_pool.py pools several runs' res.tgz the same way)
if [ -s "$OUT/res.tgz" ] && $PYTHON scripts/overhead_pool.py --goal 3 "$OUT/res.tgz" | tee -a "$LOG"; then
  say "== overhead PASS"
else
  say "== overhead FAIL"
fi

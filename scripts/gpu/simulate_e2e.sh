#!/usr/bin/env bash
# GPU validation of `ptscope run --simulate-world-size` and `--no-gpu`, in one call
# on a machine with 4 GPUs (about 5 minutes):
#
#   1. real FSDP2 training of examples/transformer_lm.py under torchrun on 2 and 4
#      GPUs (ptscope run around torchrun, every rank captured);
#   2. the same command as ONE process under --simulate-world-size 2 and 4 (rank 0),
#      and --simulate-world-size 4 --simulate-rank 3;
#   3. one real single-GPU run and the same command with CUDA hidden under --no-gpu,
#      in fp32 and bf16;
#   4. a comparison table: peak allocated of the simulated rank vs the real rank.
#
# Usage (the device tool: build the Linux binary here first):
#   GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -o bin/ptscope-sim ./cmd/ptscope
#   scripts/gpu/simulate_e2e.sh                  (on the GPU machine; OUT gets the artifacts)
# Environment: PTSCOPE (default bin/ptscope-sim, else bin/ptscope-linux-amd64), PYTHON
# (python3), WORK (/tmp/ptscope-sim), OUT ($WORK/out), SIZE (FSDP model, medium),
# CTX (1024), BATCH (8), FAKE_SIZE (small), FAKE_CTX (512), FAKE_BATCH (4).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/ptscope-sim}
OUT=${OUT:-$WORK/out}
SIZE=${SIZE:-medium}; CTX=${CTX:-1024}; BATCH=${BATCH:-8}
FAKE_SIZE=${FAKE_SIZE:-small}; FAKE_CTX=${FAKE_CTX:-512}; FAKE_BATCH=${FAKE_BATCH:-4}
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
if [ -z "${PTSCOPE:-}" ]; then
  for c in bin/ptscope-sim bin/ptscope-linux-amd64 bin/ptscope; do [ -x "$c" ] && PTSCOPE=$PWD/$c && break; done
fi
[ -n "${PTSCOPE:-}" ] || { echo "no ptscope binary: build bin/ptscope-sim (see the header)"; exit 2; }
LOG=$OUT/simulate_e2e.log
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
LM=examples/transformer_lm.py
NGPU=$($PYTHON -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
say "== $(date -u +%FT%TZ) torch $($PYTHON -c 'import torch; print(torch.__version__)') GPUs=$NGPU ptscope=$("$PTSCOPE" version 2>/dev/null | head -1)"
export PYTHONUNBUFFERED=1

CFG="--model-size $SIZE --context-length $CTX --batch-size $BATCH --mixed-precision bf16 --optimizer adamw --warmup 2 --steps 3 --fsdp"
RUNOPT="--quiet --stacks none --snapshot-at end --interval 200ms"

DEADLINE=${DEADLINE:-440} # seconds for all runs, so that the table always prints within 8 minutes
# run NAME TIMEOUT ptscope-args... -- command...: one bundle in $WORK/NAME, json in $WORK/NAME.json
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS left=$((DEADLINE - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then say "-- $name: skipped (time budget spent)"; return; fi
  say "-- $name: $*"
  timeout "$limit" "$PTSCOPE" run $RUNOPT --out "$WORK/$name" "$@" >"$WORK/$name.out" 2>&1
  local rc=$?
  tail -n 4 "$WORK/$name.out" | sed 's/^/   | /' | tee -a "$LOG"
  say "   $name: exit $rc, $((SECONDS - t0)) s"
  cat "$WORK/$name.out" >>"$LOG"
}

if [ "$NGPU" -ge 4 ]; then
  run real2 170 -- $PYTHON -m torch.distributed.run --standalone --nproc-per-node 2 $LM $CFG --json-out "$WORK/real2.json"
  run real4 170 -- $PYTHON -m torch.distributed.run --standalone --nproc-per-node 4 $LM $CFG --json-out "$WORK/real4.json"
elif [ "$NGPU" -ge 2 ]; then
  run real2 170 -- $PYTHON -m torch.distributed.run --standalone --nproc-per-node 2 $LM $CFG --json-out "$WORK/real2.json"
  say "   only $NGPU GPUs: no real 4-rank run"
fi
run sim2 120 --simulate-world-size 2 -- $PYTHON $LM $CFG --json-out "$WORK/sim2.json"
run sim4 120 --simulate-world-size 4 -- $PYTHON $LM $CFG --json-out "$WORK/sim4.json"
run sim4r3 120 --simulate-world-size 4 --simulate-rank 3 -- $PYTHON $LM $CFG --json-out "$WORK/sim4r3.json"

FCFG="--model-size $FAKE_SIZE --context-length $FAKE_CTX --batch-size $FAKE_BATCH --optimizer adamw --warmup 1 --steps 1"
for prec in none bf16; do
  run "gpu1_$prec" 120 -- $PYTHON $LM $FCFG --mixed-precision $prec --json-out "$WORK/gpu1_$prec.json"
  CUDA_VISIBLE_DEVICES= run "nogpu_$prec" 240 --no-gpu -- $PYTHON $LM $FCFG --mixed-precision $prec --json-out "$WORK/nogpu_$prec.json"
done

say "-- ptscope analyze on the simulated 4-rank bundle"
"$PTSCOPE" analyze "$WORK/sim4/latest" 2>&1 | head -n 40 | tee -a "$LOG"
say "-- ptscope analyze on the --no-gpu bundle (bf16)"
"$PTSCOPE" analyze "$WORK/nogpu_bf16/latest" 2>&1 | head -n 40 | tee -a "$LOG"

# the comparison table
$PYTHON - "$WORK" "$OUT" <<'PY' 2>&1 | tee -a "$LOG"
import glob, json, os, sys
work, out = sys.argv[1], sys.argv[2]

def js(name):
    try:
        return json.load(open(os.path.join(work, name + ".json")))
    except Exception:
        return None

def bundle(name):
    b = os.path.join(work, name, "latest")
    try:
        m = json.load(open(os.path.join(b, "manifest.json")))
    except Exception:
        return None, {}
    ranks = {}
    for r in m.get("ranks") or []:
        ranks[r["rank"]] = r
    return m, ranks

def rank_peak(rec, rank):
    """Post-warm-up peak of a rank from transformer_lm's JSON (all ranks for real runs)."""
    if rec is None:
        return None
    for r in rec.get("ranks") or []:
        if r["rank"] == rank:
            return r["max_memory_allocated"]
    return rec["max_memory_allocated"] if rec.get("rank", 0) == rank or "ranks" not in rec else None

def pct(a, b):
    return "%+.2f%%" % (100.0 * (a - b) / b) if a is not None and b else "n/a"

rows, results = [], {}
for sim, real, rank in (("sim2", "real2", 0), ("sim4", "real4", 0), ("sim4r3", "real4", 3)):
    s, r = js(sim), js(real)
    sm, sr = bundle(sim)
    rm, rr = bundle(real)
    sp, rp = rank_peak(s, rank), rank_peak(r, rank)
    sw = (sr.get(rank) or {}).get("max_allocated_bytes")
    rw = (rr.get(rank) or {}).get("max_allocated_bytes")
    rows.append((sim, real, rank, sp, rp, pct(sp, rp), sw, rw, pct(sw, rw)))
    results[sim] = {"real": real, "rank": rank, "step_peak_sim": sp, "step_peak_real": rp, "run_peak_sim": sw,
                    "run_peak_real": rw, "simulated": (sm or {}).get("simulated"), "mode": (sm or {}).get("mode"),
                    "simulation": (sm or {}).get("simulation"), "warnings": (sm or {}).get("warnings")}
print()
print("== --simulate-world-size: rank peak allocated, simulated on 1 GPU vs real torchrun (FSDP2)")
print("%-7s %-6s %4s %16s %16s %9s %16s %16s %9s" % ("sim", "real", "rank", "step peak sim", "step peak real", "diff",
                                                 "run peak sim", "run peak real", "diff"))
for r in rows:
    print("%-7s %-6s %4s %16s %16s %9s %16s %16s %9s" % tuple(str(x) if x is not None else "-" for x in r))
print()
print("== --no-gpu (CUDA hidden) vs the real single-GPU run: peak allocated")
print("%-6s %16s %16s %9s %16s %16s %9s" % ("prec", "step peak fake", "step peak real", "diff", "run peak fake",
                                            "run peak real", "diff"))
for prec in ("none", "bf16"):
    f, g = js("nogpu_" + prec), js("gpu1_" + prec)
    fm, fr = bundle("nogpu_" + prec)
    gm, gr = bundle("gpu1_" + prec)
    fp, gp = (f or {}).get("max_memory_allocated"), (g or {}).get("max_memory_allocated")
    fw, gw = (fr.get(0) or {}).get("max_allocated_bytes"), (gr.get(0) or {}).get("max_allocated_bytes")
    print("%-6s %16s %16s %9s %16s %16s %9s" % (prec, fp, gp, pct(fp, gp), fw, gw, pct(fw, gw)))
    results["nogpu_" + prec] = {"step_peak_fake": fp, "step_peak_real": gp, "run_peak_fake": fw, "run_peak_real": gw,
                                "phases_fake": (f or {}).get("phases"), "phases_real": (g or {}).get("phases"),
                                "mode": (fm or {}).get("mode"), "simulation": (fm or {}).get("simulation"),
                                "warnings": (fm or {}).get("warnings")}
    for ph_f, ph_g in zip((f or {}).get("phases") or [], (g or {}).get("phases") or []):
        print("   %-10s peak fake %14d real %14d %9s   after fake %14d real %14d" % (
            ph_f["name"], ph_f["peak_allocated"], ph_g["peak_allocated"], pct(ph_f["peak_allocated"], ph_g["peak_allocated"]),
            ph_f["allocated_after"], ph_g["allocated_after"]))
json.dump(results, open(os.path.join(out, "simulate_results.json"), "w"), indent=1)
PY

# small artifacts: manifests, process.json, phases, modules, simulation facts (no snapshots)
( cd "$WORK" && find . -path '*/latest' -prune -o \( -name manifest.json -o -name process.json -o -name phases.jsonl \
    -o -name modules.json -o -name simulation.json -o -name companion.log -o -name '*.json' \) -print \
    | grep -v '/\.ptscope/' | tar czf "$OUT/simulate_bundles.tar.gz" -T - ) 2>/dev/null
say "== done $(date -u +%FT%TZ); artifacts in $OUT"

#!/usr/bin/env python3
"""Checks one trainer bundle against the facts its process measured.

Usage: check.py BUNDLE NAME EXIT_CODE [ANALYZE_JSON]
Prints one PASS/FAIL line per check and a `summary NAME pass=N fail=M`
line; exits 1 when a check failed. Capture-side checks (what the companion
recorded), each against a number read inside the process:
  exit      ptscope passed the command's exit code through
  steps     process.json steps == the trainer's optimizer steps
  forwards  forward phases == micro-batches (one forward per micro-batch,
            however many root modules a step calls); none nested in an
            optimizer phase (closures are written as their own phases)
  peak      process.json max_allocated and the phases' last
            max_allocated_after within 1% of max_memory_allocated
  params, optimizer_state, gradients
            an inventory's bytes within 1% of the process's own sums (the
            last inventory; optimizer state: the one taken as the optimizer
            was freed, when it was freed before exit; Lightning: the largest)
  windows   stack windows: the set-up and the warm-up were stacked
  snapshot  an end snapshot (an OOM snapshot for the oom trainer)
and per trainer: DDP's bucket region, the leak's peak windows, the OOM step,
the caught OOMs' record (oom_caught: the first's, with the count).
FSDP2: the forward_end inventories name the shards (the process's parameter
bytes) and flag unsharded parameters. With ANALYZE_JSON (ptscope analyze
--json of the bundle): analyze_steps (complete steps = optimizer steps),
analyze_peak (= max_memory_allocated within 0.1%), analyze_leak or
analyze_no_leak, analyze_oom (capacity under the process's limit),
analyze_oom_caught (the caught OOMs told, none critical), and INFO
lines with categories, groups and modules next to the facts."""
import json
import os
import sys


def load_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a torn last line
    return out


def within(a, b, rel=0.01):
    return b > 0 and abs(a - b) <= rel * b


def analysis_checks(name, doc, facts, check):
    """PASS/FAIL lines for what `ptscope analyze --json` says about the run's
    main snapshot (the OOM's for the oom trainer, else the end one): steps =
    optimizer steps, the peak = max_memory_allocated (within 0.1%), the leak
    and the OOM as the process made them."""
    # a rank recorded in stack windows (the default) is one input, the run
    # (docs/analyze.md); else the OOM's snapshot, or the one written at exit
    want = "snapshot_oom.pickle" if name == "oom" else "snapshot_end.pickle"
    runs = [d for inp in doc.get("inputs", []) if (inp.get("bundle") or {}).get("history_mode") == "windows"
            and inp["bundle"].get("rank") == facts.get("rank", 0) for d in inp.get("devices", [])]
    devs = runs or [d for inp in doc.get("inputs", []) if os.path.basename(inp.get("path", "")) == want for d in inp.get("devices", [])]
    if not devs:
        check("analyze", False, "no analysed run or %s" % want)
        return
    d = devs[0]
    full = [st["name"] for st in d.get("steps", []) if not st.get("partial")]
    check("analyze_steps", len(full) == facts["optimizer_steps"] and d.get("step_source") == "ptscope_step",
          "%d complete steps from %s, optimizer steps %d" % (len(full), d.get("step_source"), facts["optimizer_steps"]))
    peak = d.get("peak", {}).get("allocated_bytes", 0)
    truth = facts["max_memory_allocated_bytes"]
    if runs:
        # the run's peak is torch's own; the peak view's is the best
        # window's, and when that is lower a finding must say so
        run_peak = d.get("peak", {}).get("process_max_allocated_bytes", 0)
        said = any(f.get("id") == "peak-outside-windows" for f in d.get("findings", []))
        check("analyze_peak", within(run_peak, truth, 0.001) and (within(peak, truth, 0.001) or said),
              "run peak %d, peak view %d%s, max_memory_allocated %d (%+.3f%%)" % (run_peak, peak,
                                                                                " (peak-outside-windows)" if said else "", truth,
                                                                                100.0 * (peak / truth - 1)))
    else:
        check("analyze_peak", within(peak, truth, 0.001),
              "peak %d, max_memory_allocated %d (%+.3f%%)" % (peak, truth, 100.0 * (peak / truth - 1)))
    if facts.get("leaked_bytes_per_step"):
        lk = d.get("leak") or {}
        stacks = lk.get("stacks") or []
        check("analyze_leak", d.get("pattern") == "leak" and within(lk.get("per_step_bytes", 0), facts["leaked_bytes_per_step"])
              and bool(stacks) and bool(stacks[0].get("frames")),
              "pattern %s, %s bytes/step (kept %d), first stack %s" % (d.get("pattern"), lk.get("per_step_bytes"),
                                                                      facts["leaked_bytes_per_step"], stacks[0]["source"] if stacks else None))
    else:
        check("analyze_no_leak", d.get("pattern") != "leak", "pattern %s" % d.get("pattern"))
    if name == "oom_caught":
        # the view holds the caught OOMs (a window's trace holds them), or a
        # finding tells of them; none is critical: the run went on
        told = [f for f in d.get("findings", []) if f.get("id") == "oom-caught"]
        ooms = d.get("ooms") or []
        crit = [f["id"] for f in d.get("findings", []) if f.get("id", "").startswith("oom-") and f.get("severity") == "critical"]
        check("analyze_oom_caught", (ooms and all(o.get("caught") for o in ooms) or
                                     told and told[0].get("numbers", {}).get("count") == facts.get("oom_count")) and not crit,
              "%d OOMs (caught %s), oom-caught %s, critical %s; the process caught %s" % (
                  len(ooms), [o.get("caught") for o in ooms], [f.get("numbers") for f in told], crit, facts.get("oom_count")))
    if name == "oom":
        o = (d.get("ooms") or [{}])[0]
        check("analyze_oom", o.get("verdict") == "capacity" and o.get("limited") and o.get("allowed_bytes") == facts.get("memory_cap_bytes"),
              "verdict %s, limited %s, allowed %s (cap %s)" % (o.get("verdict"), o.get("limited"), o.get("allowed_bytes"), facts.get("memory_cap_bytes")))


def summarize(name, doc, facts):
    """INFO lines: what `ptscope analyze --json` (docs/json.md) made of each
    snapshot, next to the process's facts: the peak, the steps, how much of
    the peak has a stack and a module path (what the default's stack
    windows must keep answerable), categories, the leak, OOMs."""
    peak = facts["max_memory_allocated_bytes"]
    for inp in doc.get("inputs", []):
        snap = os.path.basename(inp.get("path", "?"))
        if inp.get("error"):
            print("INFO %s analyze %s: error %s" % (name, snap, inp["error"]))
        for d in inp.get("devices", []):
            p = d.get("peak", {})
            steps = d.get("steps", [])
            full = [s for s in steps if not s.get("partial")]
            stacks = d.get("stacks_at_peak", [])
            total = sum(x["bytes"] for x in stacks) or 1
            framed = sum(x["bytes"] for x in stacks if x.get("frames"))
            mods = d.get("modules_at_peak", [])
            named = sum(m["bytes"] for m in mods if m["name"] and not m["name"].startswith("<"))
            cats = ", ".join("%s %.0f MiB" % (c["category"], c["bytes"] / 2**20) for c in d.get("categories_at_peak", []))
            k = p.get("step", -1)
            step = steps[k]["name"] if 0 <= k < len(steps) else "no step"
            print("INFO %s analyze %s: peak %d (%.2f%% of the process's %d) in %s of %s; %d steps (%d complete, "
                  "source %s; optimizer steps %s); at the peak %.0f%% of bytes with frames, %.0f%% with a module; %s"
                  % (name, snap, p.get("allocated_bytes", 0), 100.0 * p.get("allocated_bytes", 0) / peak, peak,
                     p.get("phase"), step, len(steps), len(full), d.get("step_source"),
                     facts.get("optimizer_steps"), 100.0 * framed / total, 100.0 * named / max(1, sum(m["bytes"] for m in mods)), cats))
            if d.get("pattern") == "leak" or facts.get("leaked_bytes_per_step"):
                lk = d.get("leak") or {}
                print("INFO %s analyze %s: pattern %s, leak %s bytes/step (the process kept %s), leak stacks with frames %d/%d"
                      % (name, snap, d.get("pattern"), lk.get("per_step_bytes"), facts.get("leaked_bytes_per_step"),
                         sum(1 for x in lk.get("stacks", []) if x.get("frames")), len(lk.get("stacks", []))))
            groups = ", ".join("%s %.0f MiB" % (g["name"], g["bytes"] / 2**20) for g in d.get("groups_at_peak", [])[:6])
            mgroups = ", ".join("%s %.0f MiB" % (g["name"], g["bytes"] / 2**20) for g in d.get("module_groups_at_peak", [])[:6])
            print("INFO %s analyze %s: groups %s; module groups %s" % (name, snap, groups, mgroups))
            for f in d.get("findings", []):
                print("INFO %s analyze %s: finding [%s] %s" % (name, snap, f.get("severity"), f.get("id")))
            for o in d.get("ooms", []):
                fb = ", ".join("%s %.0f MiB" % (c["category"], c["bytes"] / 2**20) for c in o.get("filled_by", []))
                print("INFO %s analyze %s: OOM requested %s at %s of step %s, verdict %s, filled by %s, frames %d"
                      % (name, snap, o.get("requested_bytes"), o.get("phase"), o.get("step"), o.get("verdict"), fb,
                         len(o.get("frames") or [])))


def main():
    bundle, name, want_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
    analyze = sys.argv[4] if len(sys.argv) > 4 else None
    res = {"pass": 0, "fail": 0}

    def check(what, ok, detail):
        res["pass" if ok else "fail"] += 1
        print("%s %s %s: %s" % ("PASS" if ok else "FAIL", name, what, detail))

    man = json.load(open(os.path.join(bundle, "manifest.json")))
    check("exit", man.get("exit_code") == want_rc, "exit code %s, want %d" % (man.get("exit_code"), want_rc))
    fpath = os.path.join(bundle, "facts.json")
    if not os.path.exists(fpath):
        check("facts", False, "no facts.json (the trainer did not finish)")
        print("summary %s pass=%d fail=%d" % (name, res["pass"], res["fail"]))
        sys.exit(1)
    facts = json.load(open(fpath))
    rd = os.path.join(bundle, "rank%d" % facts.get("rank", 0))
    proc = json.load(open(os.path.join(rd, "process.json"))) if os.path.exists(os.path.join(rd, "process.json")) else {}
    phases = load_jsonl(os.path.join(rd, "phases.jsonl"))
    roles = load_jsonl(os.path.join(rd, "tensors.jsonl"))
    invs, regions = [], []
    for r in roles:
        if "region" in r:
            regions.append(r)
        elif r.get("part", 0) > 0 and invs:
            invs[-1]["tensors"] += r["tensors"]
        else:
            invs.append(r)

    steps = facts.get("optimizer_steps")
    check("steps", proc.get("steps") == steps, "process.json steps %s, optimizer steps %s" % (proc.get("steps"), steps))

    fwd = [p for p in phases if p["phase"] == "forward"]
    if facts.get("micro_batches") is not None:
        check("forwards", len(fwd) == facts["micro_batches"],
              "%d forward phases, %d micro-batches (roots per forward: %s)" % (
                  len(fwd), facts["micro_batches"], sorted({p.get("roots", 1) for p in fwd})))
    if facts.get("forward_roots_per_step"):
        check("roots", all(p.get("roots", 1) == facts["forward_roots_per_step"] for p in fwd),
              "roots per forward phase %s, want %d" % (sorted({p.get("roots", 1) for p in fwd}), facts["forward_roots_per_step"]))
    nested = [p for p in phases if p["phase"] in ("forward", "backward") and p.get("parent") == "optimizer"]
    check("closures", not nested, "%d forward/backward phases inside an optimizer phase (closure phases: %d)" % (
        len(nested), sum(1 for p in phases if p.get("closure"))))

    peak = facts["max_memory_allocated_bytes"]
    pj = proc.get("max_allocated_bytes", 0)
    ph = max((p.get("max_allocated_after_bytes", 0) for p in phases), default=0)
    check("peak", within(pj, peak) and (name == "oom" or within(ph, peak)),
          "process.json %d, phases %d, process max_memory_allocated %d (%.2f%%, %.2f%%)" % (
              pj, ph, peak, 100.0 * (pj - peak) / peak, 100.0 * (ph - peak) / peak))

    def inv_bytes(inv, kind):
        seen, n = set(), 0
        for t in inv["tensors"]:
            if t["kind"] == kind and t["ptr"] not in seen:
                seen.add(t["ptr"])
                n += t["bytes"]
        return n

    last = invs[-1] if invs else None
    # the optimizer is usually freed before exit (a training function
    # returned): the inventory taken as it was finalized knows its state
    freed = next((i for i in reversed(invs) if i["at"] == "optimizer_freed"), None)
    for kind, fk in (("parameter", "parameter_bytes"), ("optimizer_state", "optimizer_state_bytes")):
        if facts.get(fk):
            inv = (freed or last) if kind == "optimizer_state" else last
            if name.startswith("lightning"):  # fit returns with the model on the CPU
                inv = max(invs, key=lambda i: inv_bytes(i, kind)) if invs else None
            got = inv_bytes(inv, kind) if inv else 0
            check(kind, within(got, facts[fk]), "%s inventory (%s) %d bytes, process %d" % (
                "largest" if name.startswith("lightning") else "last", inv and inv["at"], got, facts[fk]))
    if facts.get("gradient_bytes"):
        got = max((inv_bytes(i, "gradient") for i in invs if i["at"] in ("step_end", "backward_end")), default=0)
        check("gradients", within(got, facts["gradient_bytes"]), "inventories after backward/step %d bytes, process %d" % (
            got, facts["gradient_bytes"]))

    wins = proc.get("stack_windows") or []
    reasons = [w["reason"] for w in wins]
    check("windows", "setup" in reasons and ("warmup" in reasons or name == "oom"),
          "stack windows %s" % [(w["reason"], w["first_step"], w["last_step"]) for w in wins])
    snaps = sorted(f for f in os.listdir(rd) if f.startswith("snapshot_"))
    want_snap = "snapshot_oom.pickle" if name == "oom" else "snapshot_end.pickle"
    check("snapshot", want_snap in snaps, "snapshots %s" % snaps)

    if name == "ddp":
        b = [r for r in regions if r["region"] == "ddp_buckets"]
        got = sum(r["allocated_after_bytes"] - r["allocated_before_bytes"] for r in b)
        check("ddp_buckets", b and got >= 0.9 * facts["parameter_bytes"],
              "bucket region %d bytes, parameters %d" % (got, facts["parameter_bytes"]))
    if name == "leak":
        check("peak_windows", "peak" in reasons, "a leak raises the peak every step: windows %s" % reasons)
    if name == "oom":
        oom = proc.get("oom") or (json.load(open(os.path.join(rd, "oom.json"))) if os.path.exists(os.path.join(rd, "oom.json")) else None)
        check("oom", oom is not None and oom.get("step") == facts.get("oom_step"),
              "oom.json %s, the process ran out at step %s requesting %s" % (oom, facts.get("oom_step"), facts.get("oom_requested")))
        check("oom_inventory", any(i["at"] == "oom" for i in invs), "inventories %s" % [i["at"] for i in invs])

    if name == "oom_caught":
        oom = proc.get("oom") or {}
        check("oom_caught", facts.get("oom_count", 0) > 0 and oom.get("count") == facts.get("oom_count") and oom.get("step") == 0
              and oom.get("snapshot") == "snapshot_oom.pickle" and "snapshot_oom.pickle" in snaps,
              "process.json oom %s; the process caught %s OOMs (the first at batch %s, %s fit)" % (
                  oom, facts.get("oom_count"), facts.get("oom_first_batch"), facts.get("fit_batch")))

    if name == "fsdp2" or name == "fsdp2_sim2":
        fe = [i for i in invs if i["at"] == "forward_end"]
        sharded = max((sum(t["bytes"] for t in i["tensors"] if t.get("fsdp") == "sharded") for i in fe), default=0)
        unsharded = max((sum(1 for t in i["tensors"] if t.get("fsdp") == "unsharded") for i in fe), default=0)
        check("fsdp_inventory", fe and within(sharded, facts["parameter_bytes"]) and unsharded > 0,
              "forward_end inventories: sharded parameters %d bytes (process %d), %d unsharded tensors" % (
                  sharded, facts["parameter_bytes"], unsharded))

    if analyze and os.path.exists(analyze):
        try:
            doc = json.load(open(analyze))
            analysis_checks(name, doc, facts, check)
            summarize(name, doc, facts)
        except Exception as err:
            print("INFO %s analyze: unreadable (%r)" % (name, err))
    print("summary %s pass=%d fail=%d" % (name, res["pass"], res["fail"]))
    sys.exit(1 if res["fail"] else 0)


if __name__ == "__main__":
    main()

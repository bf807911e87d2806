#!/usr/bin/env python3
"""The table of scripts/gpu/simulate_layouts.sh: per layout and rank, the real
rank's max_memory_allocated against the simulated one's.
Usage: simulate_layouts_table.py WORK OUT_JSON"""
import glob
import json
import os
import sys

work, out_path = sys.argv[1], sys.argv[2]
J = os.path.join(work, "json")


def load(tag):
    """rank -> {layout: record} from layouts.py's JSON files of one tag."""
    res = {}
    for p in glob.glob(os.path.join(J, "%s_rank*.json" % tag)):
        try:
            d = json.load(open(p))
        except Exception:
            continue
        res[d["rank"]] = d["layouts"]
    return res


def manifest(name):
    try:
        return json.load(open(os.path.join(work, name, "latest", "manifest.json")))
    except Exception:
        return None


def rank_peaks(m, name=None):
    """rank -> max allocated from the manifest, else (a run cut short) from rank*/process.json."""
    got = {r["rank"]: r.get("max_allocated_bytes") for r in (m or {}).get("ranks") or []}
    if not got and name:
        for p in glob.glob(os.path.join(work, name, "latest", "rank*", "process.json")):
            try:
                d = json.load(open(p))
                got[int(os.path.basename(os.path.dirname(p))[4:].split("_")[0])] = d.get("max_allocated_bytes")
            except Exception:
                continue
    return got


def analyze_peaks(name):
    """rank -> peak_allocated_bytes from `ptscope analyze --fleet on --json` of a bundle."""
    try:
        doc = json.load(open(os.path.join(work, name + ".analyze.json")))
    except Exception:
        return {}
    found = {}

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "ranks" and isinstance(x, list) and x and isinstance(x[0], dict) and "peak_allocated_bytes" in x[0]:
                    for r in x:
                        found.setdefault(r.get("rank"), r.get("peak_allocated_bytes"))
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc)
    return found


def pct(a, b):
    if a is None or not b:
        return None
    return 100.0 * (a - b) / b


def fmt(v):
    return "-" if v is None else ("{:,}".format(v) if isinstance(v, int) else str(v))


real = load("real")
sim = load("sim")
for r, d in load("simpp").items():
    sim.setdefault(r, {}).update(d)
rows, worst = [], {}
layouts = []
for r in sorted(real):
    for lay in real[r]:
        if lay not in layouts:
            layouts.append(lay)
print("\n== per layout and rank: max_memory_allocated, real torchrun (4 GPUs) vs --simulate-world-size 4 on one GPU")
print("%-15s %4s %16s %16s %9s  %s" % ("layout", "rank", "real", "simulated", "diff", "note"))
for lay in layouts:
    for r in sorted(real):
        a = real[r].get(lay, {})
        b = sim.get(r, {}).get(lay, {})
        rv, sv = a.get("max_memory_allocated"), b.get("max_memory_allocated")
        d = pct(sv, rv)
        note = "; ".join(x for x in (a.get("error") and "real: " + a["error"], b.get("error") and "sim: " + b["error"]) if x)
        rows.append({"layout": lay, "rank": r, "real": rv, "simulated": sv, "diff_pct": d, "note": note})
        if d is not None:
            worst[lay] = max(worst.get(lay, 0.0), abs(d))
        print("%-15s %4d %16s %16s %9s  %s" % (lay, r, fmt(rv), fmt(sv), "-" if d is None else "%+.3f%%" % d, note))
print("worst |diff| by layout: " + ", ".join("%s %.3f%%" % kv for kv in worst.items()))

res = {"layouts": rows, "worst_pct": worst}
print("\n== Megatron-LM pretrain_gpt.py TP2 x PP2 (mock data, --transformer-impl local): per-rank max allocated")
mr, ms = manifest("mlm_real"), manifest("mlm_sim")
pr, ps = rank_peaks(mr, "mlm_real"), rank_peaks(ms, "mlm_sim")
alone = {}
for r in range(4):  # each rank simulated alone (its own bundle)
    v = rank_peaks(manifest("mlm_sim_r%d" % r), "mlm_sim_r%d" % r).get(r)
    if v is not None:
        alone[r] = v
ar, asim = analyze_peaks("mlm_real"), analyze_peaks("mlm_sim")
print("%4s %16s %16s %9s %16s %9s %18s %18s" % ("rank", "real", "sim (all)", "diff", "sim (alone)", "diff",
                                                "analyze real", "analyze sim"))
mrows = []
for r in sorted(set(pr) | set(ps) | set(alone)):
    d = pct(ps.get(r), pr.get(r))
    d1 = pct(alone.get(r), pr.get(r))
    mrows.append({"rank": r, "real": pr.get(r), "simulated": ps.get(r), "diff_pct": d, "simulated_alone": alone.get(r),
                  "diff_alone_pct": d1, "analyze_real": ar.get(r), "analyze_simulated": asim.get(r)})
    print("%4d %16s %16s %9s %16s %9s %18s %18s" % (r, fmt(pr.get(r)), fmt(ps.get(r)), "-" if d is None else "%+.3f%%" % d,
                                                  fmt(alone.get(r)), "-" if d1 is None else "%+.3f%%" % d1,
                                                  fmt(ar.get(r)), fmt(asim.get(r))))
res["megatron_tp2pp2"] = mrows
for name in ("mlm_real", "mlm_sim"):
    m = manifest(name)
    if m:
        res[name] = {"exit_code": m.get("exit_code"), "world_size": m.get("world_size"), "mode": m.get("mode"),
                     "simulation": m.get("simulation"), "warnings": m.get("warnings")}
m16 = manifest("mlm_sim16")
print("\n== Megatron-LM TP2 x PP4 x DP2 (world 16) simulated on one GPU, one rank per stage")
p16 = rank_peaks(m16, "mlm_sim16")
res["megatron_world16"] = {"peaks": p16, "exit_code": (m16 or {}).get("exit_code"),
                           "warnings": (m16 or {}).get("warnings")}
for r, v in sorted(p16.items()):
    print("%4d %16s" % (r, fmt(v)))

print("\n== FSDP2 without a GPU (--no-gpu --simulate-world-size N, CUDA hidden) vs a GPU")
real4 = (real.get(0) or {}).get("fsdp2", {}).get("max_memory_allocated")
s8 = (load("sim8").get(0) or {}).get("fsdp2", {}).get("max_memory_allocated")
ng = {}
for w, ref, what in ((4, real4, "real rank 0 of 4"), (8, s8, "--simulate-world-size 8 rank 0 on a GPU")):
    rec = (load("nogpu%d" % w).get(0) or {}).get("fsdp2", {})
    v = rec.get("max_memory_allocated")
    d = pct(v, ref)
    ng[w] = {"nogpu": v, "reference": ref, "reference_is": what, "diff_pct": d, "error": rec.get("error")}
    print("world %d: --no-gpu %s vs %s %s: %s %s" % (w, fmt(v), what, fmt(ref), "-" if d is None else "%+.2f%%" % d,
                                                   rec.get("error") or ""))
res["nogpu_fsdp2"] = ng
imb = (load("simimb").get(0) or {}).get("ep", {})
even = (sim.get(0) or {}).get("ep", {}).get("max_memory_allocated")
mi = manifest("sim_imb")
res["ep_imbalance_1_3"] = {"rank0": imb.get("max_memory_allocated"), "rank0_alike": even, "error": imb.get("error"),
                           "simulation": (mi or {}).get("simulation")}
print("\n== EP rank 0 with --simulate-imbalance 1.3: %s (every rank alike: %s, %s)" % (
    fmt(imb.get("max_memory_allocated")), fmt(even), "-" if pct(imb.get("max_memory_allocated"), even) is None
    else "%+.2f%%" % pct(imb.get("max_memory_allocated"), even)))
json.dump(res, open(out_path, "w"), indent=1)

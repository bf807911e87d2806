#!/usr/bin/env python3
"""What PyTorch's allocator history costs on the CPU-bound workload of
scripts/gpu/overhead.sh, measured inside one process so that the spread
between processes (several percent on the same host) cancels out.

The Hugging Face Trainer run of overhead_hf.py (Llama hidden 1024, 8 layers,
bf16, batch 8 x 512, 2 data-loader workers) switches the history setting every
--block steps, cycling through the settings; the first --settle steps of each
block are dropped. Prints, per setting, the median step time and its ratio to
"off", paired by cycle (each cycle's block median against the off block of the
same cycle), and the median of those ratios.

Settings (torch.cuda.memory._record_memory_history):
  off        enabled=None
  hist       enabled="all", context=None (what ptscope records outside stack windows)
  skipfree   hist with skip_actions=["free_requested"] (where torch has it)
  skipall    hist skipping alloc, free_requested and free_completed: what a
             history kept on for segment events only would cost
  alloc      context="alloc", stacks="python" (a stack window)
  ann        hist with global_record_annotations=True (ptscope's default);
             run in a second phase with off_after, because PyTorch may keep
             its annotation callback once registered

  python3 scripts/gpu/history_inproc.py [--cycles 16] [--block 10] [--skipfree]"""
import argparse
import inspect
import json
import os
import statistics
import sys
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead_hf import SEQ, VOCAB, Tokens  # noqa: E402

rec = torch.cuda.memory._record_memory_history
params = inspect.signature(rec).parameters


def setting(name):
    base = {"enabled": "all", "context": None, "stacks": "python", "max_entries": 100000}
    if "clear_history" in params:
        base["clear_history"] = False
    if name.startswith("off"):
        rec(enabled=None)
        return True
    kw = dict(base)
    if name == "skipfree":
        if "skip_actions" not in params:
            return False
        kw["skip_actions"] = ["free_requested"]
    elif name == "skipall":
        if "skip_actions" not in params:
            return False
        kw["skip_actions"] = ["alloc", "free_requested", "free_completed"]
    elif name == "alloc":
        kw["context"] = "alloc"
    elif name == "ann":
        kw["global_record_annotations"] = True
    rec(**kw)
    return True


def check():
    """What the ring keeps across switches: disable, re-enable, skip_actions."""
    def entries():
        s = torch.cuda.memory._snapshot()
        tr = s["device_traces"][torch.cuda.current_device()]
        acts = {}
        for e in tr:
            acts[e["action"]] = acts.get(e["action"], 0) + 1
        return len(tr), acts

    def churn(n):
        xs = [torch.empty(1 << 20, device="cuda") for _ in range(n)]
        del xs

    torch.cuda.empty_cache()
    base = {"enabled": "all", "context": None, "stacks": "python", "max_entries": 100000, "clear_history": False}
    rec(**dict(base, clear_history=True))
    churn(10)
    print("check: after 10 allocs+frees with history on:", entries())
    rec(enabled=None)
    churn(5)
    rec(**base)
    print("check: after disable, 5 more, re-enable (clear_history=False):", entries())
    if "skip_actions" in params:
        rec(**dict(base, skip_actions=["alloc", "free_requested", "free_completed"]))
        churn(5)
        torch.cuda.empty_cache()
        y = torch.empty(64 << 20, device="cuda")
        del y
        print("check: after skip_actions=alloc/free, 5 more, empty_cache, a new 256 MB block:", entries())
    rec(enabled=None)
    torch.cuda.empty_cache()


class Toggle(TrainerCallback):
    def __init__(self, plan, block, settle):
        self.plan, self.block, self.settle = plan, block, settle
        self.times = {}  # (cycle, name) -> [ms]
        self.cpu = {}  # (cycle, name) -> [main-thread CPU ms]
        self.last = None
        self.last_cpu = None
        self.step = 0
        self.skipped = set()

    def on_step_begin(self, args, state, control, **kw):
        i = self.step // self.block
        if self.step % self.block == 0 and i < len(self.plan):
            _, name = self.plan[i]
            if not setting(name):
                self.skipped.add(name)
                setting("off")

    def on_step_end(self, args, state, control, **kw):
        now, cpu = time.perf_counter(), time.thread_time()
        i, k = divmod(self.step, self.block)
        if self.last is not None and k >= self.settle and i < len(self.plan):
            self.times.setdefault(self.plan[i], []).append((now - self.last) * 1e3)
            self.cpu.setdefault(self.plan[i], []).append((cpu - self.last_cpu) * 1e3)
        self.last, self.last_cpu = now, cpu
        self.step += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=16)
    ap.add_argument("--cycles2", type=int, default=6)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--settle", type=int, default=2)
    ap.add_argument("--json-out", default="")
    ap.add_argument("--skipfree", action="store_true", help="also the skip_actions setting")
    ap.add_argument("--skipall", action="store_true", help="also history skipping every alloc and free")
    ap.add_argument("--check", action="store_true", help="first print what switching the history keeps")
    a = ap.parse_args()
    phase1 = ["off", "hist", "skipfree", "alloc"] if a.skipfree else ["off", "hist", "alloc"]
    if a.skipall:
        phase1.append("skipall")
    if a.check:
        check()
    phase2 = ["ann", "off_after"]
    plan = [(c, n) for c in range(a.cycles) for n in phase1]
    plan += [(a.cycles + c, n) for c in range(a.cycles2) for n in phase2]
    steps = len(plan) * a.block + 1
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=SEQ)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    cb = Toggle(plan, a.block, a.settle)
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=8, max_steps=steps,
                             bf16=True, learning_rate=1e-4, logging_steps=10**6, save_strategy="no",
                             report_to="none", disable_tqdm=True, dataloader_num_workers=2, seed=0)
    Trainer(model=model, args=args, train_dataset=Tokens(steps * 8), callbacks=[cb]).train()
    rec(enabled=None)
    print("torch", torch.__version__, torch.cuda.get_device_name(), "load", os.getloadavg(),
          "skip_actions" in params and "skip_actions supported" or "no skip_actions")
    out = {"block": a.block, "settle": a.settle, "cycles": a.cycles, "skipped": sorted(cb.skipped), "settings": {}}
    for label, data in (("wall", cb.times), ("main-thread CPU", cb.cpu)):
        print("== %s per step" % label)
        per = {}
        for (c, n), ts in data.items():
            per.setdefault(n, {})[c] = statistics.median(ts)
        off_med = statistics.median([t for (c, m), ts in data.items() if m == "off" for t in ts])
        for n in phase1 + phase2:
            if n not in per or n in cb.skipped:
                continue
            med = statistics.median([t for (c, m), ts in data.items() if m == n for t in ts])
            ref = "off" if n in phase1 else "off_after"
            ratios = [v / per[ref][c] - 1 for c, v in per[n].items() if per.get(ref, {}).get(c)]
            rr = statistics.median(ratios) * 100 if ratios else 0.0
            print("  %-10s median %7.2f ms  vs off %+6.1f%%  paired by cycle vs %s: median %+6.1f%% "
                  "(min %+.1f%%, max %+.1f%%, n=%d)" % (n, med, (med / off_med - 1) * 100, ref, rr,
                                                         min(ratios) * 100 if ratios else 0,
                                                         max(ratios) * 100 if ratios else 0, len(ratios)))
            out["settings"].setdefault(n, {})[label] = {"median_ms": med, "paired_median_ratio": rr / 100,
                                                        "cycle_medians_ms": per[n]}
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()

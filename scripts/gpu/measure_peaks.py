#!/usr/bin/env python3
"""Measures real peak memory (torch.cuda.max_memory_allocated / max_memory_reserved) of the
examples/transformer_lm.py model over a grid of configurations, for validating `ptscope estimate`.

Writes one JSON object per line to $OUT/peaks.jsonl (or --out FILE): an "env" record first
(torch, GPU, CUDA context and cuBLAS workspace baselines), then one record per configuration with
its setup, the command that reproduces it, and the measured peaks. Configurations that run out of
memory are recorded with "oom": true. Each configuration runs in this one process; memory is
released (gc + empty_cache) between them, so reserved memory starts from zero each time.

Usage (one GPU):
  OUT=out python3 scripts/gpu/measure_peaks.py [--grid full|quick] [--time-budget 480]
Multi-GPU FSDP2 (the same grid subset, one record per run, rank 0 writes):
  OUT=out torchrun --nproc-per-node 4 scripts/gpu/measure_peaks.py --fsdp --grid fsdp
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import transformer_lm as lm  # noqa: E402

SIZES = ["small", "medium", "large", "xl", "2.7B"]


def grid(name):
    cfgs = []
    if name == "quick":
        for prec in ("none", "bf16"):
            cfgs.append(dict(model_size="small", context_length=256, profile_type="training", mixed_precision=prec))
        return cfgs
    if name == "snap":  # small configurations whose allocator history explains the loss and backward terms
        return [dict(model_size="small", context_length=128, profile_type="training", mixed_precision="none"),
                dict(model_size="small", context_length=512, profile_type="training", mixed_precision="bf16")]
    if name == "fsdp":
        for size in ("small", "xl", "2.7B"):
            for prec in ("none", "bf16"):
                cfgs.append(dict(model_size=size, context_length=512, profile_type="training", mixed_precision=prec))
        return cfgs
    # full: sizes x context 128/256/512 x forward/training x fp32/bf16 autocast, AdamW, batch 4
    for size in SIZES:
        for ctx in (128, 256, 512):
            for prec in ("none", "bf16"):
                cfgs.append(dict(model_size=size, context_length=ctx, profile_type="forward", mixed_precision=prec))
                cfgs.append(dict(model_size=size, context_length=ctx, profile_type="training", mixed_precision=prec))
    # AdamW vs SGD, with and without activation checkpointing, at context 512
    for size in SIZES:
        for prec in ("none", "bf16"):
            cfgs.append(dict(model_size=size, context_length=512, profile_type="training", mixed_precision=prec,
                             optimizer="sgd"))
            cfgs.append(dict(model_size=size, context_length=512, profile_type="training", mixed_precision=prec,
                             checkpoint=True))
            cfgs.append(dict(model_size=size, context_length=512, profile_type="training", mixed_precision=prec,
                             checkpoint=True, optimizer="sgd"))
    # batch scaling
    for size in ("small", "large"):
        for bs in (1, 16):
            for prec in ("none", "bf16"):
                cfgs.append(dict(model_size=size, context_length=512, batch_size=bs, profile_type="training",
                                 mixed_precision=prec))
    return cfgs


def command_for(c, fsdp=False):
    parts = ["python3 examples/transformer_lm.py"]
    if fsdp:
        parts = ["torchrun --nproc-per-node N examples/transformer_lm.py --fsdp"]
    for k, v in c.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            parts.append(flag)
        elif v is not False and v is not None:
            parts.append(f"{flag} {v}")
    return " ".join(parts)


def env_record():
    """CUDA context and cuBLAS workspace baselines, measured before any model exists."""
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    rec = {"kind": "env", "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
           "device_total": total, "device_used_after_init": total - free,
           "reserved_after_init": torch.cuda.memory_reserved()}
    a = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    base = torch.cuda.memory_allocated()
    (a @ a).sum().backward()
    torch.cuda.synchronize()
    rec["cublas_workspace_fp32"] = torch.cuda.memory_allocated() - base - a.grad.numel() * 4 - 0
    with torch.autocast("cuda", dtype=torch.bfloat16):
        (a @ a).float().sum().backward()
    torch.cuda.synchronize()
    rec["cublas_workspace_after_bf16"] = torch.cuda.memory_allocated() - base - a.grad.numel() * 4
    del a
    gc.collect()
    torch.cuda.empty_cache()
    rec["allocated_baseline"] = torch.cuda.memory_allocated()
    free, total = torch.cuda.mem_get_info()
    rec["device_used_baseline"] = total - free
    rec["reserved_baseline"] = torch.cuda.memory_reserved()
    return rec


def hf_gpt2_record(prec):
    """The fixtures' Hugging Face GPT-2 small training step (../shared/fixtures/gen/fixtures.py)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (4, 512), device="cuda")

    def step():
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if prec == "bf16" else torch.autocast("cuda", enabled=False)
        with ctx:
            out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    import transformers
    rec = {"kind": "hf_gpt2", "config": {"model": "hf-gpt2", "batch_size": 4, "context_length": 512,
                                         "profile_type": "training", "mixed_precision": prec, "optimizer": "adamw",
                                         "attn_implementation": getattr(model.config, "_attn_implementation", None),
                                         "transformers_version": transformers.__version__,
                                         "parameters": sum(p.numel() for p in model.parameters())},
           "max_memory_allocated": torch.cuda.max_memory_allocated(),
           "max_memory_reserved": torch.cuda.max_memory_reserved()}
    del model, opt
    return rec


def snapshot_step(args, out_dir, i):
    """Rebuilds the configuration, runs warm-up steps, then records one training step's allocator
    history (python stacks) and dumps it; returns the file name."""
    model = lm.build(args)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, lm.VOCAB, (args.batch_size, args.context_length), device=args.device)
    y = torch.randint(0, lm.VOCAB, (args.batch_size, args.context_length), device=args.device)
    for _ in range(2):
        lm.phase_peaks(model, opt, x, y, args)
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    lm.phase_peaks(model, opt, x, y, args)
    name = f"snap_{i}_{args.model_size}_ctx{args.context_length}_{args.mixed_precision}.pickle"
    torch.cuda.memory._dump_snapshot(os.path.join(out_dir, name))
    torch.cuda.memory._record_memory_history(enabled=None)
    del model, opt
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", default="full", choices=["full", "quick", "fsdp", "snap"])
    ap.add_argument("--snapshot", action="store_true",
                    help="record the allocator history of one extra step per configuration and dump it to OUT")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "peaks.jsonl"))
    ap.add_argument("--time-budget", type=float, default=480, help="seconds; later configurations are skipped")
    ap.add_argument("--fsdp", action="store_true")
    ap.add_argument("--hf", action="store_true", help="also measure the Hugging Face GPT-2 fixture setup")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    t0 = time.time()
    rank = int(os.environ.get("RANK", "0"))
    f = open(a.out, "a") if rank == 0 else None

    def emit(rec):
        if f is not None:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(json.dumps(rec)[:300], flush=True)

    if a.fsdp:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    env = env_record()
    env["command"] = " ".join(sys.argv)
    emit(env)
    cfgs = grid(a.grid)
    for i, c in enumerate(cfgs):
        if not a.fsdp and time.time() - t0 > a.time_budget:  # ranks must agree under torchrun
            emit({"kind": "skipped", "config": c, "reason": "time budget"})
            continue
        argv = []
        for k, v in c.items():
            flag = "--" + k.replace("_", "-")
            if v is True:
                argv.append(flag)
            elif v is not False:
                argv += [flag, str(v)]
        argv += ["--steps", str(a.steps), "--warmup", str(a.warmup if c["profile_type"] == "training" else 1)]
        if a.fsdp:
            argv.append("--fsdp")
        args = lm.parse_args(argv)
        ts = time.time()
        try:
            rec = lm.run(args)
            rec["kind"] = "lm"
        except torch.OutOfMemoryError:
            rec = {"kind": "lm", "config": c, "oom": True}
        except Exception as e:  # keep going: one failure must not lose the grid
            rec = {"kind": "lm", "config": c, "error": repr(e), "trace": traceback.format_exc()[-800:]}
        if a.snapshot and "error" not in rec and not rec.get("oom"):
            rec["snapshot"] = snapshot_step(args, os.path.dirname(a.out), i)
        rec["command"] = command_for(c, a.fsdp)
        rec["elapsed_s"] = round(time.time() - ts, 2)
        emit(rec)
        gc.collect()
        torch.cuda.empty_cache()
    if a.hf and not a.fsdp:
        for prec in ("none", "bf16"):
            if time.time() - t0 > a.time_budget:
                break
            try:
                rec = hf_gpt2_record(prec)
            except Exception as e:
                rec = {"kind": "hf_gpt2", "prec": prec, "error": repr(e)}
            emit(rec)
            gc.collect()
            torch.cuda.empty_cache()
    emit({"kind": "done", "elapsed_s": round(time.time() - t0, 1)})
    if a.fsdp:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A pure-PyTorch decoder-only Transformer LM for memory and time measurements.

Pre-LN blocks (LayerNorm, causal self-attention through F.scaled_dot_product_attention,
GELU MLP 4x), tied input/output embeddings, learned positional embedding, vocab 50257.
Random data, no downloads. Used by ptscope's validation (scripts/gpu/measure_peaks.py) and
by the capture engineer as a realistic training command.

Examples:
  python3 examples/transformer_lm.py --model-size small --context-length 512 --batch-size 4 \
      --profile-type training --mixed-precision bf16 --optimizer adamw --json-out peaks.json
  python3 examples/transformer_lm.py --device cpu --model-size tiny --steps 1 --warmup 0
  torchrun --nproc-per-node 4 examples/transformer_lm.py --fsdp --model-size xl --context-length 512

Memory-relevant behaviour (what ptscope estimate models, keep in sync with internal/estimate):
  * training step: logits = model(x); loss = cross_entropy(logits, y) inside autocast;
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True). `logits` stays alive
    until the step function returns (as in most user code).
  * forward profile: model(x) under torch.no_grad() (inference), logits dropped right away.
  * --checkpoint wraps every block in torch.utils.checkpoint (use_reentrant=False).
  * --optimizer sgd is SGD with momentum 0.9 (one fp32 state tensor per parameter);
    adamw is torch.optim.AdamW (default foreach implementation, two state tensors).
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

VOCAB = 50257
SIZES = {
    # name: (d_model, d_ff, layers, heads)
    "tiny": (128, 512, 2, 4),
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7B": (2560, 10240, 32, 32),
}


class Attention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d_model, d_ff, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class TransformerLM(nn.Module):
    def __init__(self, d_model, d_ff, layers, heads, max_positions=1024, vocab=VOCAB, checkpoint=False):
        super().__init__()
        self.checkpoint = checkpoint
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_positions, d_model)
        self.blocks = nn.ModuleList(Block(d_model, d_ff, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            if self.checkpoint and self.training:
                x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied output embedding


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-size", default="small", choices=list(SIZES))
    p.add_argument("--context-length", type=int, default=256)
    p.add_argument("--max-positions", type=int, default=1024, help="learned position table size (>= context)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--profile-type", default="training", choices=["forward", "training"])
    p.add_argument("--mixed-precision", default="none", choices=["none", "bf16", "fp16"])
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    p.add_argument("--checkpoint", action="store_true", help="activation checkpointing per block")
    p.add_argument("--steps", type=int, default=3, help="measured steps")
    p.add_argument("--warmup", type=int, default=2, help="steps before the peak counters are reset")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard per block (run under torchrun)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--json-out", default=None)
    return p.parse_args(argv)


def _dist_setup(args):
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device.startswith("cuda"):
        torch.cuda.set_device(local)
        args.device = f"cuda:{local}"
    return dist


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:  # older torch
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def build(args):
    d, ff, n, h = SIZES[args.model_size]
    npos = max(args.max_positions, args.context_length)
    with torch.device(args.device):
        model = TransformerLM(d, ff, n, h, max_positions=npos, checkpoint=args.checkpoint)
    if args.fsdp:
        fully_shard = _fully_shard()
        for blk in model.blocks:
            fully_shard(blk)
        fully_shard(model)
    return model


def autocast_ctx(args):
    if args.mixed_precision == "none":
        return contextlib.nullcontext()
    dt = torch.bfloat16 if args.mixed_precision == "bf16" else torch.float16
    return torch.autocast(device_type=torch.device(args.device).type, dtype=dt)


def run(args):
    """Runs one configuration and returns the result record (also used by measure_peaks.py)."""
    cuda = args.device.startswith("cuda")
    world, rank = 1, 0
    if args.fsdp:
        dist = _dist_setup(args)
        world, rank = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(0)
    model = build(args)
    opt = None
    if args.profile_type == "training":
        model.train()
        if args.optimizer == "adamw":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    else:
        model.eval()
    x = torch.randint(0, VOCAB, (args.batch_size, args.context_length), device=args.device)
    y = torch.randint(0, VOCAB, (args.batch_size, args.context_length), device=args.device)
    scaler = None
    if args.mixed_precision == "fp16" and opt is not None and cuda:
        scaler = torch.amp.GradScaler("cuda")

    def train_step():
        with autocast_ctx(args):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    def forward_step():
        with torch.no_grad(), autocast_ctx(args):
            model(x)

    step = train_step if opt is not None else forward_step
    for _ in range(args.warmup):
        step()
    times = []
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    peak_alloc = torch.cuda.max_memory_allocated() if cuda else 0
    peak_res = torch.cuda.max_memory_reserved() if cuda else 0
    phases = None
    if cuda and opt is not None and scaler is None:
        phases = phase_peaks(model, opt, x, y, args)
    rec = {
        "config": {
            "model_size": args.model_size, "context_length": args.context_length,
            "max_positions": max(args.max_positions, args.context_length),
            "batch_size": args.batch_size, "profile_type": args.profile_type,
            "mixed_precision": args.mixed_precision,
            "optimizer": args.optimizer if opt is not None else None,
            "checkpoint": bool(args.checkpoint), "fsdp": bool(args.fsdp), "world_size": world,
            "warmup": args.warmup, "steps": args.steps,
            "parameters": sum(p.numel() for p in model.parameters()),  # DTensor numel is global
        },
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name() if cuda else "cpu",
        "rank": rank,
        "max_memory_allocated": peak_alloc,
        "max_memory_reserved": peak_res,
        "memory_allocated_end": torch.cuda.memory_allocated() if cuda else 0,
        "step_times_ms": [round(t, 3) for t in times],
    }
    if phases is not None:
        rec["phases"] = phases
    if cuda:
        free, total = torch.cuda.mem_get_info()
        rec["device_used_end"] = total - free
        rec["memory_reserved_end"] = torch.cuda.memory_reserved()
    if args.fsdp and world > 1:
        import torch.distributed as dist
        recs = [None] * world
        dist.all_gather_object(recs, {k: rec[k] for k in ("rank", "max_memory_allocated", "max_memory_reserved")})
        rec["ranks"] = recs
    del model, opt
    return rec


def phase_peaks(model, opt, x, y, args):
    """One more training step with the peak counter reset at each phase boundary: returns
    [{name, peak_allocated, allocated_after}] for forward (with loss), backward, optimizer."""
    out = []

    def mark(name):
        torch.cuda.synchronize()
        out.append({"name": name, "peak_allocated": torch.cuda.max_memory_allocated(),
                    "allocated_after": torch.cuda.memory_allocated()})
        torch.cuda.reset_peak_memory_stats()

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with autocast_ctx(args):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    mark("forward")
    loss.backward()
    mark("backward")
    opt.step()
    opt.zero_grad(set_to_none=True)
    mark("optimizer")
    del logits, loss
    out.insert(0, {"name": "start", "peak_allocated": before, "allocated_after": before})
    return out


def main(argv=None):
    args = parse_args(argv)
    rec = run(args)
    if args.json_out and rec["rank"] == 0:
        with open(args.json_out, "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
    if rec["rank"] == 0:
        print(f"max_memory_reserved={rec['max_memory_reserved']}")
        print(f"max_memory_allocated={rec['max_memory_allocated']}")
    if args.fsdp:
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

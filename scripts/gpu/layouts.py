#!/usr/bin/env python3
"""One training script, several parallel layouts, for comparing real multi-GPU
runs with `ptscope run --simulate-world-size` (scripts/gpu/simulate_layouts.sh).

Run the same command under torchrun (every rank on its own GPU) and under
ptscope's simulation (one rank on one GPU, or without a GPU): each rank writes
JSON_DIR/<tag>_rank<R>.json with, per layout, torch.cuda.max_memory_allocated
over that layout's steps (peak counters reset when the layout starts).

A Llama-like decoder (RMSNorm, SwiGLU MLP, causal SDPA, untied head), AdamW,
bf16 autocast, random tokens (each rank its own). Layouts (4 ranks unless said):
  fsdp2        FSDP2 fully_shard per block and the root
  tp           DTensor tensor parallelism (q/k/v, w1/w3 colwise; o, w2 rowwise)
  fsdp2tp      2 x 2 mesh: TP inside, FSDP2 across
  pp_gpipe, pp_1f1b       torch.distributed.pipelining, one stage per rank
  pp_interleaved, pp_zbv  two stages per rank (looped; V-shaped zero bubble)
  ep           MoE blocks, 2 experts per rank: token counts exchanged with
               all_to_all_single, tokens with the autograd all_to_all_single
Pipeline stages are built without input_args: PyTorch's runtime shape
inference exchanges the stage shapes (send/recv_object_list).

  torchrun --nproc-per-node 4 scripts/gpu/layouts.py --layouts fsdp2,tp --json-dir out --tag real
  ptscope run --simulate-world-size 4 --simulate-rank all -- python scripts/gpu/layouts.py ... --tag sim
"""
import argparse
import datetime
import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.hd = d // heads
        self.wq, self.wk, self.wv = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.wo = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, -1, self.hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Top-2 MoE over an expert-parallel group: this rank hosts `local` experts."""

    def __init__(self, d, ffn, experts, group):
        super().__init__()
        self.group, self.n = group, dist.get_world_size(group)
        self.local = experts // self.n
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(MLP(d, ffn) for _ in range(self.local))

    def forward(self, x):
        from torch.distributed.nn.functional import all_to_all_single

        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w, idx = self.router(x).softmax(-1).topk(2, dim=-1)
        flat = idx.flatten()
        order = flat.argsort()
        send = x[order // 2]
        counts = torch.bincount(flat, minlength=self.local * self.n)
        got = torch.empty_like(counts)
        dist.all_to_all_single(got, counts, group=self.group)
        in_splits = counts.view(self.n, -1).sum(1).tolist()
        out_splits = got.view(self.n, -1).sum(1).tolist()
        recv = all_to_all_single(x.new_empty(sum(out_splits), x.shape[1]), send, out_splits, in_splits, group=self.group)
        which = torch.arange(self.local, device=x.device).repeat(self.n).repeat_interleave(got.view(-1))
        out = torch.empty_like(recv)
        for j, e in enumerate(self.experts):
            sel = (which == j).nonzero().squeeze(1)
            out[sel] = e(recv[sel]).to(out.dtype)
        back = all_to_all_single(x.new_empty(send.shape), out, in_splits, out_splits, group=self.group)
        y = torch.empty_like(back)
        y[order] = back
        return (y.view(-1, 2, shape[-1]) * w.unsqueeze(-1).to(y.dtype)).sum(1).view(shape)


class Block(nn.Module):
    def __init__(self, a, moe_group=None):
        super().__init__()
        self.n1, self.attn = RMSNorm(a.dim), Attention(a.dim, a.heads)
        self.n2 = RMSNorm(a.dim)
        self.mlp = MoE(a.dim, a.expert_ffn, a.experts, moe_group) if moe_group is not None else MLP(a.dim, a.ffn)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class LM(nn.Module):
    """layers [lo, hi) of the model; embeddings when lo == 0, norm and head when hi == all."""

    def __init__(self, a, lo=0, hi=None, moe_group=None):
        super().__init__()
        hi = a.layers if hi is None else hi
        self.tok = nn.Embedding(a.vocab, a.dim) if lo == 0 else None
        self.layers = nn.ModuleList(Block(a, moe_group) for _ in range(lo, hi))
        last = hi == a.layers
        self.norm = RMSNorm(a.dim) if last else None
        self.head = nn.Linear(a.dim, a.vocab, bias=False) if last else None

    def forward(self, h):
        if self.tok is not None:
            h = self.tok(h)
        for layer in self.layers:
            h = layer(h)
        if self.head is not None:
            h = self.head(self.norm(h))
        return h


def loss_fn(logits, y):
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


def batch(a, dev, rank, step, size=None):
    g = torch.Generator(device="cpu").manual_seed(1000 * rank + step)
    x = torch.randint(0, a.vocab, (size or a.batch, a.seq), generator=g)
    return x.to(dev), torch.roll(x, -1, 1).to(dev)


def autocast():
    return torch.autocast("cuda", dtype=torch.bfloat16)


def dense_steps(a, model, dev, rank, foreach=None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
    for step in range(a.steps):
        x, y = batch(a, dev, rank, step)
        with autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return opt


def tp_plan(block, mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(), "mlp.w1": ColwiseParallel(), "mlp.w3": ColwiseParallel(),
            "mlp.w2": RowwiseParallel()}
    parallelize_module(block, mesh, plan)


def run_dense(a, layout, dev, rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = LM(a).to(dev)
    if layout == "fsdp2":
        mesh = init_device_mesh("cuda", (world,))
        for b in model.layers:
            fully_shard(b, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif layout == "tp":
        mesh = init_device_mesh("cuda", (world,))
        for b in model.layers:
            tp_plan(b, mesh)
    elif layout == "fsdp2tp":
        mesh = init_device_mesh("cuda", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        for b in model.layers:
            tp_plan(b, mesh["tp"])
            fully_shard(b, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    # plain TP leaves norms, embeddings and head plain tensors beside DTensor
    # weights: foreach kernels cannot take both
    return model, dense_steps(a, model, dev, rank, foreach=False if layout == "tp" else None)


def run_pp(a, layout, dev, rank, world):
    from torch.distributed import pipelining as pp

    per_rank = 1 if layout in ("pp_gpipe", "pp_1f1b") else 2
    n = world * per_rank
    if layout == "pp_zbv":
        ids = [rank, 2 * world - 1 - rank]
    else:
        ids = [rank + k * world for k in range(per_rank)]
    per = a.layers // n
    torch.manual_seed(0)
    stages, mods = [], []
    for i in ids:
        m = LM(a, i * per, (i + 1) * per).to(dev)
        mods.append(m)
        stages.append(pp.PipelineStage(m, i, n, dev))
    mb = a.microbatches
    if layout == "pp_gpipe":
        sched = pp.ScheduleGPipe(stages[0], mb, loss_fn=loss_fn)
    elif layout == "pp_1f1b":
        sched = pp.Schedule1F1B(stages[0], mb, loss_fn=loss_fn)
    elif layout == "pp_interleaved":
        sched = pp.ScheduleInterleaved1F1B(stages, mb, loss_fn=loss_fn)
    else:
        sched = pp.ScheduleZBVZeroBubble(stages, mb, loss_fn=loss_fn)
    first = any(s.is_first for s in stages)
    last = any(s.is_last for s in stages)
    opt = torch.optim.AdamW([p for m in mods for p in m.parameters()], lr=1e-4)
    for step in range(a.steps):
        x, y = batch(a, dev, 0, step, 2 * mb)  # a pipeline's ranks see one batch, 2 samples per micro-batch
        args = (x,) if first else ()
        kw = {"target": y, "losses": []} if last else {}
        with autocast():
            sched.step(*args, **kw)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return mods, opt


def run_ep(a, dev, rank, world):
    torch.manual_seed(0)
    model = LM(a, moe_group=dist.group.WORLD).to(dev)
    return model, dense_steps(a, model, dev, rank)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layouts", default="fsdp2,tp,fsdp2tp,ep,pp_1f1b,pp_interleaved,pp_gpipe,pp_zbv")
    p.add_argument("--json-dir", default=".")
    p.add_argument("--tag", default="run")
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--expert-ffn", type=int, default=2816)
    p.add_argument("--ep-layers", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=90))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    out = {"rank": rank, "world": world, "torch": torch.__version__, "layouts": {}}
    # one-time allocations of a process (cuBLAS workspaces) before the first
    # layout's peak counter starts, so that no layout's peak depends on its place
    w = torch.randn(64, 64, device=dev, requires_grad=True)
    with autocast():
        (w @ w).float().sum().backward()
    (w.detach() @ w.detach()).sum().item()
    del w
    for layout in a.layouts.split(","):
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        t0 = time.time()
        rec = {}
        try:
            if layout.startswith("pp_"):
                keep = run_pp(a, layout, dev, rank, world)
            elif layout == "ep":
                la = argparse.Namespace(**vars(a))
                la.layers = a.ep_layers
                keep = run_ep(la, dev, rank, world)
            else:
                keep = run_dense(a, layout, dev, rank, world)
            torch.cuda.synchronize()
            rec["max_memory_allocated"] = torch.cuda.max_memory_allocated() - base
            del keep
        except Exception as err:  # the table says which layout failed and why
            import traceback

            traceback.print_exc()
            rec["error"] = "%s: %s" % (type(err).__name__, str(err).splitlines()[0] if str(err) else "")
        rec["seconds"] = round(time.time() - t0, 2)
        out["layouts"][layout] = rec
        print("layout %s rank %d: %s" % (layout, rank, rec), flush=True)
        os.makedirs(a.json_dir, exist_ok=True)  # after every layout: a later hang loses nothing
        with open(os.path.join(a.json_dir, "%s_rank%d.json" % (a.tag, rank)), "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

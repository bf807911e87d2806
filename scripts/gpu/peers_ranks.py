"""Real multi-rank Kineto traces for the cross-rank checks (issue 29): a small
transformer trained with DDP or FSDP2 under torchrun, one trace per rank, and
optionally extra host work (a sleep) on one rank before each forward, the
straggler the other ranks then wait for in their collectives.

    torchrun --nproc-per-node 4 peers_ranks.py --mode fsdp2 --out DIR [--slow-rank 0 --slow-ms 20]

Writes DIR/rank{R}.<ns>.pt.trace.json.gz (tensorboard_trace_handler, gzip) and
DIR/facts.rank{R}.json (step times and the sleep measured in the process).
Schedule: wait 1, warmup 2, active 3 of 8 steps.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


class LM(nn.Module):
    def __init__(self, d=1024, layers=8, vocab=8192):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, 16, 4 * d, dropout=0.0, batch_first=True, norm_first=True) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "fsdp2"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = LM().to(dev)
    if a.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[dev.index])
    else:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cpu").manual_seed(rank)
    steps, slept = [], []
    os.makedirs(a.out, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=2, active=3, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(a.out, worker_name="rank%d" % rank, use_gzip=True)) as prof:
        for _ in range(a.steps):
            t0 = time.perf_counter()
            x = torch.randint(0, 8192, (8, 512), generator=g).to(dev, non_blocking=True)
            if rank == a.slow_rank:
                s = time.perf_counter()
                time.sleep(a.slow_ms / 1000)  # host work on this rank only
                slept.append(time.perf_counter() - s)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.mode == "ddp"):
                loss = model(x).float().logsumexp(-1).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize(dev)
            steps.append(time.perf_counter() - t0)
            prof.step()
    with open(os.path.join(a.out, "facts.rank%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "world": world, "mode": a.mode, "slow_rank": a.slow_rank, "slow_ms": a.slow_ms,
                   "step_s": steps, "slept_s": slept, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(dev)}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Record small real Kineto traces whose facts are known in the process, for
scripts/gpu/trace_checks.sh (issue 12, trace side). Each case writes
CASE.pt.trace.json and CASE.facts.json into OUT.

  python3 trace_checks.py OUT noschedule   # torch.profiler without prof.step(): 3 optimizer steps
  python3 trace_checks.py OUT ddp1         # DDP at world size 1 with the NCCL backend
  python3 trace_checks.py OUT dataloader   # a GPU waiting for a slow DataLoader (time measured in the loop)

Needs one CUDA GPU; each case runs in a few seconds.
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule


def model(d=1024, layers=4):
    return nn.Sequential(*[nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)) for _ in range(layers)]).cuda()


def step(m, opt, x):
    loss = m(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def noschedule(out):
    """Three training steps inside one profile() without prof.step()."""
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randn(64, 1024, device="cuda")
    for _ in range(2):  # warm up outside the profiler
        step(m, opt, x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(m, opt, x)
        torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(out, "noschedule.pt.trace.json"))
    return {"optimizer_steps": 3, "profiler_steps": 0}


def ddp1(out):
    """DDP at world size 1 with NCCL: no NCCL kernel runs, yet NCCL is the backend."""
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    m = nn.parallel.DistributedDataParallel(model(), device_ids=[0])
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randn(64, 1024, device="cuda")
    sched = schedule(wait=1, warmup=1, active=3, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "ddp1.pt.trace.json"))) as prof:
        for _ in range(6):
            step(m, opt, x)
            prof.step()
    backend = dist.get_backend()
    dist.destroy_process_group()
    return {"world_size": 1, "backend": backend, "active_steps": 3}


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(0.0005)  # 0.5 ms of "decoding" per sample
        return torch.randn(1024)


def dataloader(out):
    """A small model fed by a slow single-process DataLoader: the loop times
    the DataLoader's __next__ and the whole step (synchronised), so that the
    DataLoader share of the step is known in the process."""
    m = model(layers=2)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    it = iter(torch.utils.data.DataLoader(Slow(), batch_size=16, num_workers=0, pin_memory=True))
    for _ in range(2):
        step(m, opt, next(it).cuda(non_blocking=True))
    torch.cuda.synchronize()
    wait, total = 0.0, 0.0
    sched = schedule(wait=0, warmup=1, active=8, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "dataloader.pt.trace.json"))) as prof:
        for k in range(9):
            t0 = time.perf_counter()
            x = next(it)
            t1 = time.perf_counter()
            step(m, opt, x.cuda(non_blocking=True))
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            if k >= 1:  # the active steps
                wait += t1 - t0
                total += t2 - t0
            prof.step()
    return {"active_steps": 8, "dataloader_share_in_process": wait / total, "step_s_in_process": total / 8}


if __name__ == "__main__":
    out, case = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    facts = {"noschedule": noschedule, "ddp1": ddp1, "dataloader": dataloader}[case](out)
    facts.update({"torch": torch.__version__, "device": torch.cuda.get_device_name(0)})
    with open(os.path.join(out, case + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(case, json.dumps(facts))

"""A small distributed job whose ranks differ on purpose, for scripts/gpu/fleet_real.sh.

Every rank trains the same MLP under DistributedDataParallel (NCCL when each rank has its own
GPU, gloo when ranks share one) and writes what a real job writes, named as real tools name it:

  OUT/snapshots/iteration_6/rank{R}_memory_snapshot.pickle  (torchtitan's layout; the rank is in the name)
  OUT/traces/HOST_PID.TIME.pt.trace.json                    (tensorboard_trace_handler's default
                                                             worker_name: the rank is only in
                                                             distributedInfo)
  OUT/facts/rank{R}.json                                     (what torch measured in the process)

Rank 0 holds an extra 256 MiB buffer (a rank that also evaluates or logs): the memory outlier.
The last rank's DataLoader sleeps 30 ms a batch: the straggler (the others wait for it in the
gradients' all-reduce).

    python fleet_train.py --world 4 --out DIR
"""
import argparse
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

EXTRA_BYTES = 256 << 20
SLOW_S = 0.030
STEPS = 6


class Batches(torch.utils.data.Dataset):
    """Random batches; slow ones on the straggler."""

    def __init__(self, slow):
        self.slow = slow

    def __len__(self):
        return STEPS

    def __getitem__(self, i):
        if self.slow:
            time.sleep(SLOW_S)
        return torch.randn(64, 1024)


def run(rank, world, out, port):
    ngpu = torch.cuda.device_count()
    torch.cuda.set_device(rank % ngpu)
    backend = "nccl" if ngpu >= world else "gloo"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend, rank=rank, world_size=world)
    dev = torch.device("cuda", rank % ngpu)
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats(dev)
    torch.cuda.memory._record_memory_history(max_entries=200000)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
                                  for _ in range(4)]).to(dev)
    ddp = DDP(model, device_ids=[dev.index])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    extra = torch.empty(EXTRA_BYTES, dtype=torch.uint8, device=dev) if rank == 0 else None
    step_s = []
    trace_dir = os.path.join(out, "traces")
    loader = torch.utils.data.DataLoader(Batches(rank == world - 1), batch_size=None, num_workers=0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(trace_dir)) as prof:
        t0 = time.perf_counter()
        for x in loader:
            x = x.to(dev, non_blocking=True)
            loss = ddp(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize(dev)
            step_s.append(time.perf_counter() - t0)
            prof.step()
            t0 = time.perf_counter()
    snap_dir = os.path.join(out, "snapshots", "iteration_%d" % STEPS)
    os.makedirs(snap_dir, exist_ok=True)
    torch.cuda.memory._dump_snapshot(os.path.join(snap_dir, "rank%d_memory_snapshot.pickle" % rank))
    torch.cuda.memory._record_memory_history(enabled=None)
    facts = {"rank": rank, "world": world, "backend": backend, "host": socket.gethostname(), "pid": os.getpid(),
             "max_memory_allocated": torch.cuda.max_memory_allocated(dev), "step_s": step_s,
             "extra_bytes": EXTRA_BYTES if rank == 0 else 0}
    os.makedirs(os.path.join(out, "facts"), exist_ok=True)
    with open(os.path.join(out, "facts", "rank%d.json" % rank), "w") as f:
        json.dump(facts, f)
    del extra
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    mp.spawn(run, args=(a.world, a.out, a.port), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()

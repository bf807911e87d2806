"""A distributed training script over testdata/faketorch, for --simulate-world-size.
Usage: fakedist.py [ok|fail|pp]. Prints what torch.distributed reported. pp: a
pipeline's stage-shape exchange as PyTorch 2.11's pipelining does it (keywords
use_batch and device): each rank receives the previous rank's shapes."""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed import init_process_group  # bound at import, as many programs do

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
print("backend=%s rank=%d world=%d env=%s,%s,%s" % (dist.get_backend(), dist.get_rank(), dist.get_world_size(),
      os.environ.get("RANK"), os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_RANK")))
shard = torch.empty((64 << 20) // dist.get_world_size())  # this rank's shard
for _ in range(3):
    dist.all_gather_into_tensor(None, None)
    dist.reduce_scatter_tensor(None, None)
dist.all_reduce(None)
objs = [None] * dist.get_world_size()
dist.all_gather_object(objs, {"rank": dist.get_rank()})
print("gathered=%r" % (objs,))
if mode == "pp":
    r, n = dist.get_rank(), dist.get_world_size()
    shapes = [("hidden", 8, 128)] if r == 0 else [None]
    if r > 0:
        dist.recv_object_list(shapes, src=r - 1, group=None, device="cuda:0", use_batch=True)
    print("rank %d received %r" % (r, shapes))
    if r < n - 1:
        dist.send_object_list([(shapes[0][0], shapes[0][1], shapes[0][2] + r + 1)], dst=r + 1, device="cuda:0",
                              use_batch=True)
if mode == "fail":
    flag = [None]
    dist.broadcast_object_list(flag, src=0)
    if flag[0] is None:
        raise ValueError("no stop flag received")
shard.free()

"""A torchrun stand-in for the tests: imports torch (never initialises CUDA),
starts N copies of a script with RANK/LOCAL_RANK/WORLD_SIZE set (or only
LOCAL_RANK with --local-only), and exits with the worst exit code.
With --init-cuda the launcher initialises CUDA itself (as some launchers do
to ask for device names) without allocating anything.
Usage: fakelaunch.py N [--local-only] [--init-cuda] SCRIPT ARGS..."""
import os
import subprocess
import sys

import torch  # noqa: F401  (torchrun imports torch too)

n = int(sys.argv[1])
args = sys.argv[2:]
local_only = args and args[0] == "--local-only"
if local_only:
    args = args[1:]
if args and args[0] == "--init-cuda":
    args = args[1:]
    torch.cuda._lazy_init()
procs = []
for r in range(n):
    env = dict(os.environ, LOCAL_RANK=str(r))
    if not local_only:
        env.update(RANK=str(r), WORLD_SIZE=str(n))
    procs.append(subprocess.Popen([sys.executable] + args, env=env))
sys.exit(max(p.wait() for p in procs))

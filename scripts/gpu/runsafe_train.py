"""A small CUDA training loop for scripts/gpu/runsafe.sh.

It holds --gib of GPU memory, trains a linear layer, counts the SIGTERMs it
receives (a handler that keeps going), writes READY.<rank> with its pid once
training runs, and ends --after seconds after the first SIGTERM (or after
--seconds), writing the count to COUNT.<rank>.
"""
import argparse
import os
import signal
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--ready", required=True)
p.add_argument("--count", required=True)
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--after", type=float, default=2)
p.add_argument("--gib", type=float, default=1)
a = p.parse_args()
rank = os.environ.get("RANK", "0")
count = 0
first = None


def on_term(signum, frame):
    global count, first
    count += 1
    if first is None:
        first = time.time()


signal.signal(signal.SIGTERM, on_term)
hold = torch.empty(int(a.gib * 2**30), dtype=torch.uint8, device="cuda")
model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = time.time()
step = 0
while time.time() - start < a.seconds:
    loss = model(torch.randn(64, 1024, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch.cuda.synchronize()
    step += 1
    if step == 3:
        with open("%s.%s" % (a.ready, rank), "w") as f:
            f.write(str(os.getpid()))
    if first is not None and time.time() - first > a.after:
        break
    time.sleep(0.01)
with open("%s.%s" % (a.count, rank), "w") as f:
    f.write(str(count))

"""A training loop over testdata/faketorch, for the companion's tests.
Usage: faketrain.py STEPS [train|oom|forward|sleep|closure|wrapped|accum|bf16] ; prints max_memory_allocated=N.
bf16: bf16 parameters under CUDA autocast (otherwise fp32 without);
closure: forward and backward run inside optimizer.step(closure) (as Lightning does);
wrapped: a wrapping optimizer's step calls the inner one's; accum: 2 micro-batches per step."""
import sys
import time

import torch

mode = sys.argv[2] if len(sys.argv) > 2 else "train"
# bf16: bf16 parameters under autocast (the precision facts' other case)
PARAM_DTYPE = torch.bfloat16 if mode == "bf16" else torch.float32
torch.set_autocast_enabled(mode == "bf16")


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(1 << 20, PARAM_DTYPE)  # 1M elements

    def forward(self, x):
        return torch.empty(4 << 20)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()

    def forward(self, x):
        return self.attn(x)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h0 = Block()
        self.h1 = Block()

    def forward(self, x):
        a = self.h0(x)
        b = self.h1(x)
        a.free()
        return b


steps = int(sys.argv[1])
params = torch.empty(16 << 20)
net = Net()
opt = torch.optim.Optimizer(32 << 20)
if mode == "wrapped":
    opt = torch.optim.WrappingOptimizer(opt)


def closure():
    o = net(None)
    torch.autograd.backward(o)
    o.free()


for i in range(steps):
    if mode == "closure":
        opt.step(closure)
        continue
    if mode == "accum":
        closure()
    out = net(None)
    if mode == "oom" and i == 1:
        torch.empty(2 << 30)
    if mode != "forward":
        torch.autograd.backward(out)
        opt.step()
    out.free()
    if mode == "sleep":
        time.sleep(0.05)
print("max_memory_allocated=%d" % torch.cuda.max_memory_allocated())

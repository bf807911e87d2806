"""A training loop over testdata/faketorch, for the companion's tests.
Usage: faketrain.py STEPS [MODE] ; prints max_memory_allocated=N and the
module calls that ran with and without hooks (module_calls fast=N slow=M).

The model has two blocks, each holding one attention module with 1M
parameters (fp32: 4 MiB each); a forward allocates two 4 MiB outputs and
frees one; the optimizer keeps two state tensors per parameter.
MODE:
  train     forward, backward, optimizer step, zero_grad (the default)
  bf16      bf16 parameters under CUDA autocast (otherwise fp32 without)
  accel     fp32 parameters, autocast entered inside the model's forward (as
            accelerate's wrapped forward does, after the module's pre-hooks)
  closure   forward and backward run inside optimizer.step(closure)
  wrapped   a wrapping optimizer's step calls the inner one's (accelerate)
  accum     2 micro-batches per optimizer step
  forward   forward only (grad enabled, no backward): each call is a step
  oom       runs out of memory in the forward of step 1
  retry     runs out of memory in the forwards of steps 1 and 3, catches it
            each time and goes on (as a batch-size finder does)
  sleep     sleeps 50 ms after each step
  roots     like Lightning's training_step: the loop calls three submodules
            of an unused parent module directly, then one backward and step
  lightning roots inside optimizer.step(closure) (Lightning's automatic optimisation)
  nograd    roots under torch.no_grad(), no optimizer: each iteration is a step
  ddp       the model wrapped in DistributedDataParallel
  leak      from step 5 on, each step keeps a 4 MiB tensor (the peak rises every step)
  killed    leak, then the process kills itself with SIGKILL after its last step
            (no atexit: the companion never finishes)
  fsdp      each attention module and the model under (fake) FSDP2's fully_shard
  limit     like train, under torch.cuda.set_per_process_memory_fraction(0.04)
            (a 41 MiB limit on the fake 1 GiB device, the steps reserve 38 MiB)
  scoped    like train, but the optimizer is made and used inside a function
            (in a reference cycle, as a Trainer holds it) and is collected
            before the program ends, as a real training function's is
"""
import sys
import time

import torch

mode = sys.argv[2] if len(sys.argv) > 2 else "train"
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


class Lit(torch.nn.Module):
    """A LightningModule stand-in: never called itself."""

    def __init__(self):
        super().__init__()
        self.emb = Block()
        self.enc = Block()
        self.head = Block()

    def training_step(self):
        a = self.emb(None)
        b = self.enc(a)
        c = self.head(b)
        a.free()
        b.free()
        return c


steps = int(sys.argv[1])
torch.cuda._lazy_init()
if mode == "limit":
    torch.cuda.set_per_process_memory_fraction(0.04)
lit = mode in ("roots", "lightning", "nograd")
net = Lit() if lit else Net()
if mode == "ddp":
    net = torch.nn.parallel.DistributedDataParallel(net)
if mode == "accel":
    plain_forward = net.forward

    def autocast_forward(x):
        torch.set_autocast_enabled(True)
        try:
            return plain_forward(x)
        finally:
            torch.set_autocast_enabled(False)

    net.forward = autocast_forward
if mode == "fsdp":
    for blk in (net.h0, net.h1):
        torch.distributed.fsdp.fully_shard(blk.attn)
opt = None if mode == "scoped" else torch.optim.Optimizer(net.parameters())
if mode == "wrapped":
    opt = torch.optim.WrappingOptimizer(opt)


def forward():
    return net.training_step() if lit else net(None)


def closure():
    o = forward()
    torch.autograd.backward(o)
    o.free()


kept = []


def train(opt):
    for i in range(steps):
        if mode in ("closure", "lightning"):
            opt.step(closure)
            opt.zero_grad()
            continue
        if mode == "nograd":
            with torch.no_grad():
                forward().free()
            continue
        if mode == "accum":
            closure()
        out = forward()
        if mode == "oom" and i == 1:
            torch.empty(2 << 30)
        if mode == "retry" and i in (1, 3):
            try:
                torch.empty((i + 1) << 30)
            except RuntimeError:
                pass
        if mode != "forward":
            torch.autograd.backward(out)
            if mode == "fsdp":
                torch.distributed.fsdp.reshard_all(net)
            opt.step()
            opt.zero_grad()
        out.free()
        if mode == "sleep":
            time.sleep(0.05)
        if mode in ("leak", "killed") and i >= 5:
            kept.append(torch.empty(4 << 20))


class Holder:
    """A Trainer stand-in that holds its optimizer in a reference cycle."""


def scoped():
    h = Holder()
    h.opt = torch.optim.Optimizer(net.parameters())
    h.opt.holder = h
    train(h.opt)


if mode == "scoped":
    import gc

    scoped()
    gc.collect()
else:
    train(opt)
print("max_memory_allocated=%d" % torch.cuda.max_memory_allocated())
if mode == "killed":
    import os
    import signal

    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
# module calls on and off the fast path (faketorch's count, as _call_impl takes them)
print("module_calls fast=%d slow=%d" % (torch._CALLS["fast"], torch._CALLS["slow"]))

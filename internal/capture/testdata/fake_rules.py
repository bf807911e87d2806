"""The pure rules of the companion's --no-gpu (no torch needed): run by
TestFakeRules as `python3 fake_rules.py COMPANION_DIR`."""
import gc
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "companion")
from ptscope_companion import _fake_rules as r  # noqa: E402


def check(got, want, what):
    if got != want:
        raise SystemExit("%s: got %r, want %r" % (what, got, want))


class Storage:
    """A storage as the tracker sees one: an identity and a size in bytes."""
    n_made = 0

    def __init__(self, nbytes):
        Storage.n_made += 1
        self._cdata = 0x1000 * Storage.n_made
        self.n = nbytes

    def nbytes(self):
        return self.n


class Tensor:
    def __init__(self, st):
        self.st = st

    def untyped_storage(self):
        return self.st


check(r.rounded(0), 0, "rounded 0")
check(r.rounded(1), 512, "rounded 1")
check(r.rounded(1024), 1024, "rounded 1024")
check(r.rounded(1025), 1536, "rounded 1025")

t = r.Tracker()
a = Storage(1000)
t.add(a, "blocks.0")
check((t.current, t.peak), (1024, 1024), "one storage")
t.add(a, "blocks.1")  # a view of it, made in another module: counted once, where it was made
check((t.current, t.module_live), (1024, {"blocks.0": 1024}), "a view counts once")
check(t.is_gpu(Tensor(a)), True, "is_gpu")
check(t.is_gpu(Tensor(Storage(8))), False, "is_gpu of an untracked storage")

# FSDP's reshard and unshard: the storage is resized in place, the tensors stay
a.n = 0
t.resized(a)
check((t.current, t.peak, t.module_live["blocks.0"]), (0, 1024, 0), "resized to 0")
check(t.is_gpu(Tensor(a)), True, "a storage resized to 0 still stands for GPU memory")
a.n = 3000
t.resized(a)
check((t.current, t.peak, t.resizes), (3072, 3072, 2), "resized up")
a.n = 3000
t.resized(a)
check(t.resizes, 2, "a resize to the same size counts nothing")
untracked = Storage(5000)
t.resized(untracked)
check(t.current, 3072, "a CPU storage's resize")

# an out= op that grew its output's storage: add brings it to its size
b = Storage(512)
t.add(b)
b.n = 2048
t.add(b)
check((t.current, t.peak), (3072 + 2048, 3072 + 2048), "an output storage grown in place")

# the storage dies: its bytes, at their current size, go
t.reset_peak()
del b
gc.collect()
check((t.current, t.peak), (3072, 3072 + 2048), "freed")
del a
gc.collect()
check((t.current, t.module_live), (0, {"blocks.0": 0}), "freed after resizes")

# sites: what was alive at the peak, by source line
s = r.Tracker(sites=True)
x, y, z = Storage(4096), Storage(1024), Storage(8192)
s.add(x, None, "train.py:10 forward (aten.mm)")
s.add(y, None, "train.py:11 forward (aten.add)")
del x
gc.collect()
s.add(z, None, "train.py:12 step (aten.zeros_like)")
check(s.top_sites(), [{"site": "train.py:12 step (aten.zeros_like)", "bytes": 8192},
                      {"site": "train.py:11 forward (aten.add)", "bytes": 1024}], "sites at the peak")
check(r.site("aten.mm", 0).endswith("fake_rules.py:%d <module> (aten.mm)" % sys._getframe().f_lineno), True,
      "site names the caller outside torch")


# which ops' outputs stand for GPU memory from their device argument
class Dev:
    def __init__(self, t):
        self.type = t


check(r.device_type(Dev("cuda")), "cuda", "device_type of a device")
check(r.device_type("cuda:1"), "cuda", "device_type of a string")
check(r.device_type(None), None, "device_type of None")
marker, gpu, host = Dev("cpu"), Dev("cuda"), Dev("cpu")
other = Dev("cpu")  # a CPU device that is not the marker: the program asked for the CPU
check(r.retarget((4,), {"device": marker}, marker, gpu, host), ((4,), {"device": gpu}),
      "torch.empty(4, device=x.device) of a fake CUDA tensor")
check(r.retarget((4,), {"device": other}, marker, gpu, host), None, "torch.empty(4, device='cpu')")
check(r.retarget((4,), {}, marker, gpu, host), None, "torch.empty(4)")
check(r.retarget(("t", marker), {}, marker, gpu, host), (("t", gpu), {}), "cpu_tensor.to(x.device)")
check(r.retarget(("t", marker, "bf16"), {}, marker, gpu, host, True), (("t", host, "bf16"), {}),
      "gpu_tensor.to(x.device, bf16): the dtype alone")
check(r.retarget(("t", "cuda:0"), {}, marker, gpu, host, True), (("t", host), {}), "gpu_tensor.to('cuda:0')")
check(r.retarget(("t",), {"device": Dev("cuda")}, marker, gpu, host, True), (("t",), {"device": host}),
      "gpu_tensor.to(device=cuda)")
check(r.retarget(("t", "bf16"), {}, marker, gpu, host, True), None, "gpu_tensor.to(bf16)")
check(r.retarget(("t", other), {}, marker, gpu, host, True), None, "gpu_tensor.to('cpu'): a copy to the host")


# which tensor types the tracker lets dispatch their own ops
class Plain:
    pass


class Param(Plain):
    pass


class Fake(Plain):
    pass


class FakeParam(Fake):
    pass


class DTensor(Plain):
    pass


class Functional(Plain):
    _mode_key = 3


plain, infra = (Plain, Param), (Fake,)
check(r.foreign_subclass((), plain, infra), False, "no tensors")
check(r.foreign_subclass((Plain, Param, Fake, FakeParam), plain, infra), False, "plain and fake tensors")
check(r.foreign_subclass((Fake, DTensor), plain, infra), True, "a DTensor")
check(r.foreign_subclass((Functional,), plain, infra), False, "an infra subclass with a mode key")
print("fake rules: ok")

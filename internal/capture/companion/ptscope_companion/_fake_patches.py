"""The parts of torch that `ptscope run --no-gpu` replaces (see _fake):
torch.cuda's device, memory and stream functions answered from the tracker,
and the places where fake CUDA tensors need help to pass for GPU tensors:
Module.to's tensor swap, x.device, in-place storage resizes, the optimizers'
foreach choice."""
import contextlib
import sys
import types

import torch

from . import log_once


class _Stream:
    def __init__(self, *a, **k):
        self.device = torch.device("cuda:0")

    def synchronize(self):
        pass

    def wait_stream(self, *a):
        pass

    def wait_event(self, *a):
        pass

    def record_event(self, *a, **k):
        return _Event()

    def query(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class _Event(_Stream):
    def record(self, *a):
        pass

    def wait(self, *a):
        pass

    def elapsed_time(self, other):
        return 0.0


def patch_cuda(torch, tracker, total):
    cuda = torch.cuda
    props = types.SimpleNamespace(name="fake GPU (ptscope --no-gpu)", total_memory=total, major=9, minor=0,
                                  multi_processor_count=132, is_integrated=False, L2_cache_size=50 << 20)

    def stats(device=None):
        return {"allocated_bytes.all.current": tracker.current, "allocated_bytes.all.peak": tracker.peak,
                "reserved_bytes.all.current": tracker.current, "reserved_bytes.all.peak": tracker.peak,
                "active_bytes.all.current": tracker.current, "active_bytes.all.peak": tracker.peak,
                "num_alloc_retries": 0, "num_ooms": 0}

    patches = {
        "is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
        "set_device": lambda d: None, "synchronize": lambda d=None: None, "is_initialized": lambda: True,
        "_lazy_init": lambda: None, "init": lambda: None,
        "get_device_name": lambda d=None: props.name, "get_device_properties": lambda d=None: props,
        "get_device_capability": lambda d=None: (9, 0), "is_bf16_supported": lambda *a, **k: True,
        "mem_get_info": lambda d=None: (total - tracker.current, total),
        "memory_allocated": lambda d=None: tracker.current, "max_memory_allocated": lambda d=None: tracker.peak,
        "memory_reserved": lambda d=None: tracker.current, "max_memory_reserved": lambda d=None: tracker.peak,
        "reset_peak_memory_stats": lambda d=None: tracker.reset_peak(),
        "reset_max_memory_allocated": lambda d=None: tracker.reset_peak(),
        "reset_accumulated_memory_stats": lambda d=None: None,
        "memory_stats": stats, "empty_cache": lambda: None,
        "manual_seed": lambda s: None, "manual_seed_all": lambda s: None, "seed": lambda: None,
        "seed_all": lambda: None, "is_current_stream_capturing": lambda: False,
        "current_stream": lambda d=None: _Stream(), "default_stream": lambda d=None: _Stream(),
        "Stream": _Stream, "Event": _Event, "stream": lambda s=None: contextlib.nullcontext(),
        "set_per_process_memory_fraction": lambda *a, **k: None,
    }
    for k, v in patches.items():
        setattr(cuda, k, v)
    mem = getattr(cuda, "memory", None)
    if mem is not None:
        for k in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                  "reset_peak_memory_stats", "memory_stats", "empty_cache", "mem_get_info"):
            setattr(mem, k, patches[k])
        mem._record_memory_history = lambda *a, **k: None
        mem._snapshot = lambda *a, **k: {"segments": [], "device_traces": [[]]}


def patch_swap_tensors(torch, tracker):
    """Module.to("cuda") swaps each fake parameter with its converted copy
    (torch.utils.swap_tensors), which refuses a tensor something holds a
    weak reference to. The copy here differs from the parameter only in
    standing for GPU memory: where swapping is refused, the parameter's own
    storage is counted as GPU memory instead (the copy's count goes with the
    copy), or its data is replaced when dtype or shape changed."""
    utils = getattr(torch, "utils", None)
    orig = getattr(utils, "swap_tensors", None)
    if orig is None:
        return

    def swap_tensors(t1, t2):
        try:
            return orig(t1, t2)
        except RuntimeError as err:
            if "weakref" not in str(err):
                raise
        if t1.dtype == t2.dtype and t1.shape == t2.shape and t1.stride() == t2.stride():
            if tracker.is_gpu(t2):
                tracker.add(t1.untyped_storage(), None)
            return None
        t1.data = t2.data
        return None

    swap_tensors.__wrapped__ = orig
    utils.swap_tensors = swap_tensors


def patch_fake_device(torch, tracker):
    """x.device of a fake CUDA tensor gives the tracker's marker: the CPU
    device (fake tensors live on it), equal to any other, but this very
    object, so that the function mode makes tensors made "like" it
    (torch.empty(n, device=x.device), as FSDP makes its all-gather outputs)
    on the GPU. Only for the program's own reads: inside the dispatch mode
    (FakeTensorMode's kernels) x.device is what it was."""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except Exception:  # pragma: no cover
        return
    prop = FakeTensor.__dict__.get("device")
    marker = torch.device("cpu")
    if not isinstance(prop, property) or marker is torch.device("cpu"):  # no property, or devices interned
        log_once("fake marker", "--no-gpu: tensors made with device=x.device of a fake CUDA tensor count as CPU "
                 "memory (this PyTorch's FakeTensor.device cannot be told apart)")
        return
    tls = tracker.tls

    def device(self):
        d = prop.fget(self)
        if getattr(tls, "depth", 0) == 0 and getattr(d, "type", None) == "cpu" and tracker.is_gpu(self):
            return marker
        return d

    FakeTensor.device = property(device, prop.fset, prop.fdel, prop.__doc__)
    tracker.marker = marker


def patch_storage_resize(torch, tracker):
    """A storage resized in place (untyped_storage().resize_(n), as FSDP
    frees and re-allocates its unsharded parameters) changes no op's output:
    the tracker is told its new size. A fake tensor's storage is a meta
    storage, whose resize_ does not pass the dispatcher."""
    cls = getattr(torch, "UntypedStorage", None)
    orig = getattr(cls, "resize_", None)
    if orig is None:
        return

    def resize_(self, *args, **kwargs):
        out = orig(self, *args, **kwargs)
        tracker.resized(self)
        return out

    resize_.__wrapped__ = orig
    resize_.__doc__ = orig.__doc__
    cls.resize_ = resize_


def patch_foreach_default(torch):
    """Optimizers choose foreach kernels for CUDA tensors by default; the fake
    tensors here are CPU tensors, so make the same choice where foreach
    kernels run on fake tensors."""
    try:
        import torch.optim.optimizer as optmod
    except Exception:
        return
    orig = getattr(optmod, "_default_to_fused_or_foreach", None)
    if orig is None:
        return

    probe = {}

    def foreach_runs():
        if "ok" not in probe:
            try:
                a = [torch.zeros(4), torch.zeros(8)]
                b = [torch.ones(4), torch.ones(8)]
                torch._foreach_lerp_(a, b, 0.1)
                torch._foreach_mul_(a, 0.9)
                torch._foreach_addcmul_(a, b, b, value=0.1)
                d = torch._foreach_sqrt(a)
                torch._foreach_div_(d, 2.0)
                torch._foreach_add_(d, 1e-8)
                torch._foreach_addcdiv_(a, b, d, value=-0.1)
                probe["ok"] = True
            except Exception as err:
                probe["ok"] = False
                log_once("fake foreach", "--no-gpu: foreach optimizer kernels do not run on fake tensors (%r); "
                         "optimizers use their per-tensor loop (CUDA would use foreach)" % (err,))
        return probe["ok"]

    def choose(params, differentiable, use_fused=False):
        fused, foreach = orig(params, differentiable, use_fused)
        if fused or foreach or differentiable or torch.jit.is_scripting():
            return fused, foreach
        ok = all(p is None or torch.is_floating_point(p) for p in params)
        return False, ok and foreach_runs()

    for name, mod in list(sys.modules.items()):
        if mod is not None and name.startswith("torch.optim") and getattr(mod, "_default_to_fused_or_foreach", None) is orig:
            setattr(mod, "_default_to_fused_or_foreach", choose)

"""A tiny stand-in for torch, just enough of its API for the ptscope companion's
tests on machines without PyTorch. It models one CUDA device whose caching
allocator counts bytes, calls OOM observers and keeps a trace of allocations.
It is NOT torch: real behaviour is checked by scripts/gpu-e2e.sh on a GPU."""
import threading
import time
import types

__version__ = "0.0-fake"
version = types.SimpleNamespace(cuda="0.0", hip=None)

# ---------------------------------------------------------------- allocator
_A = {"alloc": 0, "reserved": 0, "peak": 0, "peak_res": 0, "capacity": 1 << 30,
      "history": False, "trace": [], "ann": [], "observers": [], "metadata": "", "ctx": {}}


def _record(action, size):
    if _A["history"]:
        e = {"action": action, "size": size, "time_us": int(time.time() * 1e6), "addr": len(_A["trace"])}
        if _A["metadata"]:
            e["user_metadata"] = _A["metadata"]
        _A["trace"].append(e)


class Tensor:
    def __init__(self, nbytes):
        if _A["alloc"] + nbytes > _A["capacity"]:
            for ob in list(_A["observers"]):
                ob(0, nbytes, _A["alloc"], _A["capacity"] - _A["alloc"])
            raise RuntimeError("CUDA out of memory. Tried to allocate %d bytes" % nbytes)
        self.nbytes = nbytes
        _A["alloc"] += nbytes
        _A["peak"] = max(_A["peak"], _A["alloc"])
        if _A["alloc"] > _A["reserved"]:
            _A["reserved"] = _A["alloc"]
            _A["peak_res"] = max(_A["peak_res"], _A["reserved"])
        _record("alloc", nbytes)

    def free(self):
        if self.nbytes:
            _A["alloc"] -= self.nbytes
            _record("free_completed", self.nbytes)
            self.nbytes = 0


def empty(nbytes):
    cuda._lazy_init()
    return Tensor(nbytes)


# ---------------------------------------------------------------- torch._C
_C = types.ModuleType("torch._C")


def _stats(device=0):
    return {"allocated_bytes": {"all": {"current": _A["alloc"], "peak": _A["peak"]}},
            "reserved_bytes": {"all": {"current": _A["reserved"], "peak": _A["peak_res"]}}}


_C._cuda_memoryStats = _stats
_C._cuda_attach_out_of_memory_observer = lambda fn: _A["observers"].append(fn)
_C._current_graph_task_id = lambda: -1

# ---------------------------------------------------------------- torch.cuda
cuda = types.ModuleType("torch.cuda")
cuda._initialized = False
cuda._queued = []
cuda._tls = threading.local()


def _lazy_init():
    if cuda._initialized or getattr(cuda._tls, "busy", False):
        return
    cuda._tls.busy = True
    try:
        for fn in cuda._queued:
            fn()
    finally:
        cuda._tls.busy = False
    cuda._initialized = True


def _lazy_call(fn):
    if cuda._initialized:
        fn()
    else:
        cuda._queued.append(fn)


cuda._lazy_init = _lazy_init
cuda._lazy_call = _lazy_call
cuda.is_available = lambda: True
cuda.device_count = lambda: 1
cuda.current_device = lambda: 0
cuda.set_device = lambda d: None
cuda.mem_get_info = lambda d=None: (_A["capacity"] - _A["reserved"] - (100 << 20), _A["capacity"])
cuda.get_device_properties = lambda d=None: types.SimpleNamespace(
    name="Fake GPU", total_memory=_A["capacity"], major=9, minor=0, multi_processor_count=1)
cuda.memory_stats = lambda d=None: {}
cuda.max_memory_allocated = lambda d=None: _A["peak"]
cuda.memory = types.ModuleType("torch.cuda.memory")


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=1, device=None,
                           clear_history=False, global_record_annotations=False):
    _A["history"] = enabled is not None
    _A["ctx"] = {"context": context, "stacks": stacks, "max_entries": max_entries,
                 "global_record_annotations": global_record_annotations}


def _snapshot(device=None):
    return {"segments": [{"total_size": _A["reserved"], "blocks": []}], "device_traces": [list(_A["trace"])],
            "external_annotations": list(_A["ann"]), "allocator_settings": {}, "fake_history_options": dict(_A["ctx"])}


def _set_memory_metadata(s):
    _A["metadata"] = s


cuda.memory._record_memory_history = _record_memory_history
cuda.memory._snapshot = _snapshot
cuda.memory._set_memory_metadata = _set_memory_metadata

# ---------------------------------------------------------------- autograd
autograd = types.ModuleType("torch.autograd")
autograd.profiler = types.ModuleType("torch.autograd.profiler")


class record_function:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _A["ann"].append({"name": self.name, "stage": "START", "time_us": int(time.time() * 1e6), "device": 0})
        return self

    def __exit__(self, *a):
        _A["ann"].append({"name": self.name, "stage": "END", "time_us": int(time.time() * 1e6), "device": 0})


autograd.profiler.record_function = record_function


def backward(tensors, *a, **k):
    for t in tensors if isinstance(tensors, (list, tuple)) else [tensors]:
        g = Tensor(getattr(t, "nbytes", 0) or 1024)  # a gradient-sized temporary
        g.free()


autograd.backward = backward

# ---------------------------------------------------------------- nn
nn = types.ModuleType("torch.nn")
nn.modules = types.ModuleType("torch.nn.modules")
nn.modules.module = types.ModuleType("torch.nn.modules.module")
_PRE, _POST = [], []


class _Handle:
    def __init__(self, lst, fn):
        self.lst, self.fn = lst, fn

    def remove(self):
        if self.fn in self.lst:
            self.lst.remove(self.fn)


def register_module_forward_pre_hook(fn):
    _PRE.append(fn)
    return _Handle(_PRE, fn)


def register_module_forward_hook(fn, always_call=False):
    _POST.append(fn)
    return _Handle(_POST, fn)


nn.modules.module.register_module_forward_pre_hook = register_module_forward_pre_hook
nn.modules.module.register_module_forward_hook = register_module_forward_hook


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __str__(self):
        return "torch." + self.name


float32, bfloat16 = dtype("float32", 4), dtype("bfloat16", 2)
_AUTOCAST = {"on": False, "dtype": bfloat16}


def is_autocast_enabled(device_type="cuda"):
    return _AUTOCAST["on"]


def get_autocast_dtype(device_type):
    return _AUTOCAST["dtype"]


def set_autocast_enabled(on):  # the tests' stand-in for `with torch.autocast(...)`
    _AUTOCAST["on"] = on


class Parameter:
    def __init__(self, n, dt=float32):
        self.n, self.dtype = n, dt

    def numel(self):
        return self.n

    def element_size(self):
        return self.dtype.itemsize


class Module:
    def __init__(self):
        self.__dict__["_children"] = {}
        self.__dict__["_params"] = {}

    def __setattr__(self, k, v):
        if isinstance(v, Module):
            self._children[k] = v
        if isinstance(v, Parameter):
            self._params[k] = v
        object.__setattr__(self, k, v)

    def named_modules(self, prefix=""):
        yield prefix, self
        for k, m in self._children.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + k)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def parameters(self):
        for m in self.modules():
            yield from m._params.values()

    def __call__(self, *args):
        for h in list(_PRE):
            h(self, args)
        out = None
        try:
            out = self.forward(*args)
        finally:
            for h in list(_POST):
                h(self, args, out)
        return out

    def __hash__(self):
        return id(self)


nn.Module = Module
nn.Parameter = Parameter

# ---------------------------------------------------------------- optim
optim = types.ModuleType("torch.optim")
optim.optimizer = types.ModuleType("torch.optim.optimizer")
_OPRE, _OPOST = [], []
optim.optimizer.register_optimizer_step_pre_hook = lambda fn: (_OPRE.append(fn), _Handle(_OPRE, fn))[1]
optim.optimizer.register_optimizer_step_post_hook = lambda fn: (_OPOST.append(fn), _Handle(_OPOST, fn))[1]


class Optimizer:
    def __init__(self, state_bytes):
        self.state = None
        self.state_bytes = state_bytes

    def step(self, closure=None):
        for h in list(_OPRE):
            h(self, (), {})
        if closure is not None:
            closure()
        if self.state is None:
            self.state = Tensor(self.state_bytes)
        tmp = Tensor(self.state_bytes // 4)
        tmp.free()
        for h in list(_OPOST):
            h(self, (), {})


optim.Optimizer = Optimizer


class WrappingOptimizer(Optimizer):
    """Like accelerate's AcceleratedOptimizer: its step runs the inner optimizer's step."""

    def __init__(self, inner):
        self.inner = inner

    def step(self, closure=None):
        for h in list(_OPRE):
            h(self, (), {})
        self.inner.step(closure)
        for h in list(_OPOST):
            h(self, (), {})


optim.WrappingOptimizer = WrappingOptimizer

# ---------------------------------------------------------------- profiler
profiler = types.ModuleType("torch.profiler")
profiler.ProfilerActivity = types.SimpleNamespace(CPU="cpu", CUDA="cuda")


def schedule(wait, warmup, active, repeat=0, skip_first=0):
    def fn(step):
        if step < skip_first:
            return "none"
        step -= skip_first
        cycle = wait + warmup + active
        if repeat and step // cycle >= repeat:
            return "none"
        pos = step % cycle
        if pos < wait:
            return "none"
        if pos < wait + warmup:
            return "warmup"
        return "save" if pos == cycle - 1 else "record"
    return fn


class profile:
    def __init__(self, activities=None, schedule=None, on_trace_ready=None, **kw):
        self.schedule, self.on_trace_ready, self.step_num, self.kw = schedule, on_trace_ready, 0, kw

    def start(self):
        pass

    def step(self):
        act = self.schedule(self.step_num)
        self.step_num += 1
        if act == "save" and self.on_trace_ready:
            self.on_trace_ready(self)

    def stop(self):
        pass

    def export_chrome_trace(self, path):
        import gzip
        import json
        data = json.dumps({"traceEvents": [{"name": "ProfilerStep#%d" % self.step_num, "ph": "X"}], "options": self.kw})
        with (gzip.open(path, "wt") if path.endswith(".gz") else open(path, "w")) as f:
            f.write(data)


profiler.profile = profile
profiler.schedule = schedule

# ---------------------------------------------------------------- distributed
# Just enough of torch.distributed for the --simulate-world-size tests: a
# "fake" backend that, like PyTorch's, exchanges no data.
distributed = types.ModuleType("torch.distributed")
c10d = types.ModuleType("torch.distributed.distributed_c10d")
_C._distributed_c10d = types.ModuleType("torch._C._distributed_c10d")
_PG = {}


class FakeStore:
    pass


class HashStore:
    pass


_C._distributed_c10d.FakeStore = FakeStore


class Backend:
    backend_list = ["gloo", "nccl", "fake"]


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    if backend != "fake":
        raise RuntimeError("faketorch: only the fake backend works here (got %r)" % (backend,))
    if store is None:
        raise RuntimeError("faketorch: the fake backend needs a store")
    _PG.update(backend=backend, world_size=world_size, rank=rank, store=type(store).__name__)


def _need():
    if not _PG:
        raise RuntimeError("Default process group has not been initialized")


def get_rank(group=None):
    _need()
    return _PG["rank"]


def get_world_size(group=None):
    _need()
    return _PG["world_size"]


def get_backend(group=None):
    _need()
    return _PG["backend"]


def _noop(*a, **k):
    _need()


def all_gather_object(object_list, obj, group=None):
    _need()
    for i in range(len(object_list)):
        object_list[i] = b"\x00garbage"  # what unpickling uninitialised buffers gives


for _n, _f in dict(init_process_group=init_process_group, get_rank=get_rank, get_world_size=get_world_size,
                   get_backend=get_backend, is_initialized=lambda: bool(_PG), is_available=lambda: True,
                   all_reduce=_noop, barrier=_noop, broadcast=_noop, all_gather_into_tensor=_noop,
                   reduce_scatter_tensor=_noop, broadcast_object_list=_noop, all_gather_object=all_gather_object,
                   Backend=Backend, HashStore=HashStore).items():
    setattr(c10d, _n, _f)
    setattr(distributed, _n, _f)
distributed.distributed_c10d = c10d

import sys as _sys

for _m in (_C, _C._distributed_c10d, distributed, c10d, cuda, cuda.memory, autograd, autograd.profiler, nn, nn.modules, nn.modules.module, optim,
           optim.optimizer, profiler):
    _sys.modules[_m.__name__] = _m

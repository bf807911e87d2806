"""A tiny stand-in for torch, just enough of its API for the ptscope companion's
tests on machines without PyTorch. It models one CUDA device whose caching
allocator counts bytes and allocation events, keeps a trace of allocations
(with per-thread user metadata and stacks while a stack context is on), calls
OOM observers, and a toy autograd: module outputs made with grad enabled get
a node; backward runs the nodes in reverse on a worker thread (as PyTorch's
device threads do), running their pre-hooks, allocating a temporary per node
and the gradients of the module's parameters.
It is NOT torch: real behaviour is checked by the scripts under scripts/gpu."""
import contextlib
import threading
import time
import os
import types

__version__ = "0.0-fake"
version = types.SimpleNamespace(cuda="0.0", hip=None)

# ---------------------------------------------------------------- allocator
_A = {"alloc": 0, "reserved": 0, "peak": 0, "peak_res": 0, "capacity": 1 << 30,
      "history": False, "trace": [], "ann": [], "observers": [], "ctx": {},
      "n_alloc": 0, "n_free": 0, "next_addr": 1 << 32, "history_calls": [], "live": {}}
_TLS = threading.local()  # per-thread allocation metadata, as in PyTorch's allocator


def _record(action, size, addr):
    if _A["history"]:
        e = {"action": action, "size": size, "time_us": int(time.time() * 1e6), "addr": addr}
        md = getattr(_TLS, "metadata", "")
        if md:
            e["user_metadata"] = md
        ctx = _A["ctx"].get("context")
        if ctx in ("alloc", "all", "state") and (action == "alloc" or ctx == "all"):
            e["frames"] = [{"name": "fake", "filename": "fake.py", "line": 1}]
        _A["trace"].append(e)
        if len(_A["trace"]) > _A["ctx"].get("max_entries", 1 << 30):  # a ring of max_entries
            del _A["trace"][0]


class _Storage:
    def __init__(self, t):
        self.t = t

    def data_ptr(self):
        return self.t.addr

    def nbytes(self):
        return self.t.nbytes


class Tensor:
    is_cuda = True

    def __init__(self, nbytes, dt=None):
        limit = int(_A["capacity"] * _A.get("fraction", 1.0))
        if _A["alloc"] + nbytes > limit:
            # as the caching allocator calls them: the process's limit when
            # it set a fraction, else the device's total; the device's free
            for ob in list(_A["observers"]):
                ob(0, nbytes, limit, cuda.mem_get_info()[0])
            raise RuntimeError("CUDA out of memory. Tried to allocate %d bytes" % nbytes)
        self.nbytes = nbytes
        self.dtype = dt or float32
        self.shape = (nbytes // self.dtype.itemsize,)
        self.grad_fn = None
        self.grad = None
        self.addr = _A["next_addr"]
        _A["next_addr"] += (nbytes + 511) // 512 * 512 or 512
        _A["alloc"] += nbytes
        _A["n_alloc"] += 1
        _A["peak"] = max(_A["peak"], _A["alloc"])
        if _A["alloc"] > _A["reserved"]:
            _A["reserved"] = _A["alloc"]
            _A["peak_res"] = max(_A["peak_res"], _A["reserved"])
        _record("alloc", nbytes, self.addr)

    def free(self):
        if self.nbytes:
            _A["alloc"] -= self.nbytes
            _A["n_free"] += 1
            _record("free_completed", self.nbytes, self.addr)
            self.nbytes = 0

    def data_ptr(self):
        return self.addr

    def untyped_storage(self):
        return _Storage(self)

    def numel(self):
        return self.nbytes // self.dtype.itemsize

    def element_size(self):
        return self.dtype.itemsize


def empty(nbytes):
    cuda._lazy_init()
    return Tensor(nbytes)


# ---------------------------------------------------------------- grad mode
_GRAD = threading.local()


def is_grad_enabled():
    return getattr(_GRAD, "on", True)


@contextlib.contextmanager
def no_grad():
    prev = is_grad_enabled()
    _GRAD.on = False
    try:
        yield
    finally:
        _GRAD.on = prev


# ---------------------------------------------------------------- torch._C
_C = types.ModuleType("torch._C")


def _stats(device=0):
    return {"allocated_bytes": {"all": {"current": _A["alloc"], "peak": _A["peak"]}},
            "reserved_bytes": {"all": {"current": _A["reserved"], "peak": _A["peak_res"]}},
            "allocation": {"all": {"allocated": _A["n_alloc"], "freed": _A["n_free"]}},
            "segment": {"all": {"allocated": 0, "freed": 0}}}


_C._cuda_memoryStats = _stats


def _accel_stats(device=0):
    # FAKETORCH_ACCEL_STATS=refuse: the accelerator binding raises, as it
    # would where the accelerator is not CUDA; =shape: another dict shape
    mode = os.environ.get("FAKETORCH_ACCEL_STATS")
    if mode == "refuse":
        raise RuntimeError("no accelerator allocator")
    if mode == "shape":
        return {"allocated_bytes.all.current": _A["alloc"]}
    _A["accel_calls"] = _A.get("accel_calls", 0) + 1
    return _stats(device)


_C._accelerator_getDeviceStats = _accel_stats
_C._cuda_attach_out_of_memory_observer = lambda fn: _A["observers"].append(fn)
_C._current_graph_task_id = lambda: getattr(_TLS, "graph_task", -1)
_C._autograd = types.ModuleType("torch._C._autograd")
_C._autograd._profiler_enabled = lambda: bool(_A.get("profiling"))

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
cuda.max_memory_reserved = lambda d=None: _A["peak_res"]
cuda.memory = types.ModuleType("torch.cuda.memory")


def _set_fraction(f, device=None):
    _A["fraction"] = float(f)


cuda.set_per_process_memory_fraction = _set_fraction
cuda.get_per_process_memory_fraction = lambda device=None: _A.get("fraction", 1.0)


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=1, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False):
    _A["history_calls"].append({"enabled": enabled, "context": context, "stacks": stacks})
    if enabled is None or clear_history:  # as PyTorch: disabling empties the ring and the annotations
        _A["trace"].clear()
        _A["ann"].clear()
    _A["history"] = enabled is not None
    _A["ctx"] = {"context": context, "stacks": stacks, "max_entries": max_entries,
                 "global_record_annotations": global_record_annotations}


def _snapshot(device=None):
    return {"segments": [{"total_size": _A["reserved"], "blocks": []}], "device_traces": [list(_A["trace"])],
            "external_annotations": list(_A["ann"]), "allocator_settings": {}, "fake_history_options": dict(_A["ctx"]),
            "fake_history_calls": list(_A["history_calls"]), "fake_accel_calls": _A.get("accel_calls", 0)}


def _set_memory_metadata(s):
    _TLS.metadata = s


cuda.memory._record_memory_history = _record_memory_history
cuda.memory._snapshot = _snapshot
cuda.memory._set_memory_metadata = _set_memory_metadata

# ---------------------------------------------------------------- autograd
autograd = types.ModuleType("torch.autograd")
autograd.profiler = types.ModuleType("torch.autograd.profiler")


class record_function:
    def __init__(self, name):
        self.name = name

    # ranges reach the allocator's annotations only while its history
    # records them (global_record_annotations)
    def __enter__(self):
        if _A.get("history") and _A["ctx"].get("global_record_annotations"):
            _A["ann"].append({"name": self.name, "stage": "START", "time_us": int(time.time() * 1e6), "device": 0})
        return self

    def __exit__(self, *a):
        if _A.get("history") and _A["ctx"].get("global_record_annotations"):
            _A["ann"].append({"name": self.name, "stage": "END", "time_us": int(time.time() * 1e6), "device": 0})


autograd.profiler.record_function = record_function

_TAPE = []  # nodes made by module forwards since the last backward


class _Node:
    """An autograd node: a module output's grad_fn."""

    def __init__(self, size, params):
        self.size, self.params, self.pre = size, params, []

    def register_prehook(self, fn):
        self.pre.append(fn)
        return _Handle(self.pre, fn)

    def name(self):
        return "FakeBackward0"


def _run_backward(roots):
    _TLS.graph_task = 1
    try:
        seen = set()
        for t in roots:
            if t.grad_fn is not None and id(t.grad_fn) not in seen:
                seen.add(id(t.grad_fn))
                for h in list(t.grad_fn.pre):
                    h((None,))
        for node in reversed(_TAPE):
            if id(node) not in seen:
                for h in list(node.pre):
                    h((None,))
            g = Tensor(node.size or 1024)  # the node's gradient temporary
            g.free()
            for p in node.params:
                if p.grad is None:
                    p.grad = Tensor(p.nbytes, p.dtype)
    finally:
        _TLS.graph_task = -1


def backward(tensors, *a, **k):
    roots = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if not _TAPE:  # no graph (plain tensors): a gradient-sized temporary
        for t in roots:
            g = Tensor(getattr(t, "nbytes", 0) or 1024)
            g.free()
        return
    err = []

    def run():
        try:
            _run_backward(roots)
        except BaseException as e:  # re-raised on the caller's thread
            err.append(e)

    th = threading.Thread(target=run, name="fake-autograd-device-thread")
    th.start()
    th.join()
    del _TAPE[:]
    if err:
        raise err[0]


autograd.backward = backward

# ---------------------------------------------------------------- nn
nn = types.ModuleType("torch.nn")
nn.modules = types.ModuleType("torch.nn.modules")
nn.modules.module = types.ModuleType("torch.nn.modules.module")
_PRE, _POST = [], []
_CALLS = {"fast": 0, "slow": 0}  # module calls on and off _call_impl's fast path (tests read them)


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


class Parameter(Tensor):
    """A parameter of n elements, allocated on the fake device."""

    def __init__(self, n, dt=float32):
        cuda._lazy_init()
        Tensor.__init__(self, n * dt.itemsize, dt)
        self.n = n

    def numel(self):
        return self.n


class Module:
    def __init__(self):
        self.__dict__["_children"] = {}
        self.__dict__["_params"] = {}
        self.__dict__["_buffers"] = {}

    def __setattr__(self, k, v):
        if isinstance(v, Module):
            self._children[k] = v
        elif isinstance(v, Parameter):
            self._params[k] = v
        object.__setattr__(self, k, v)

    def register_buffer(self, k, t):
        self._buffers[k] = t
        object.__setattr__(self, k, t)

    def named_modules(self, prefix=""):
        yield prefix, self
        for k, m in self._children.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + k)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix="", remove_duplicate=True):
        for mp, m in self.named_modules(prefix):
            for k, p in m._params.items():
                yield (mp + "." if mp else "") + k, p

    def named_buffers(self, prefix="", remove_duplicate=True):
        for mp, m in self.named_modules(prefix):
            for k, b in m._buffers.items():
                yield (mp + "." if mp else "") + k, b

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def register_forward_pre_hook(self, fn):
        lst = self.__dict__.setdefault("_fpre", [])
        lst.append(fn)
        return _Handle(lst, fn)

    def register_forward_hook(self, fn, always_call=False):
        lst = self.__dict__.setdefault("_fpost", [])
        lst.append(fn)
        return _Handle(lst, fn)

    def __call__(self, *args):
        # as torch.nn.Module._call_impl: without any hook, the fast path;
        # the pre-hooks (global, then the module's) are read before the
        # first runs, the post-hooks after forward returns
        pre, post = self.__dict__.get("_fpre"), self.__dict__.get("_fpost")
        if not (_PRE or _POST or pre or post):
            _CALLS["fast"] += 1
            return self._forward(args)
        _CALLS["slow"] += 1
        for h in (*_PRE, *(pre or ())):
            h(self, args)
        out = None
        try:
            out = self._forward(args)
        finally:
            for h in (*_POST, *(self.__dict__.get("_fpost") or ())):
                h(self, args, out)
        return out

    def _forward(self, args):
        out = self.forward(*args)
        if isinstance(out, Tensor) and out.grad_fn is None and is_grad_enabled():
            out.grad_fn = _Node(out.nbytes, list(self._params.values()))
            _TAPE.append(out.grad_fn)
        elif isinstance(out, Tensor) and out.grad_fn is not None and self._params:
            out.grad_fn.params.extend(self._params.values())
        return out

    def __hash__(self):
        return id(self)


nn.Module = Module
nn.Parameter = Parameter

# DistributedDataParallel: its init helper allocates the gradient buckets and
# its forward runs _pre_forward (where PyTorch rebuilds buckets) first.
nn.parallel = types.ModuleType("torch.nn.parallel")
nn.parallel.distributed = types.ModuleType("torch.nn.parallel.distributed")


class DistributedDataParallel(Module):
    def __init__(self, module):
        Module.__init__(self)
        self.module = module
        self._ddp_init_helper()

    def _ddp_init_helper(self):
        self.__dict__["bucket"] = Tensor(sum(p.nbytes for p in self.module.parameters()))

    def _pre_forward(self, *args):
        return args

    def forward(self, *args):
        args = self._pre_forward(*args)
        return self.module(*args)


nn.parallel.DistributedDataParallel = DistributedDataParallel
nn.parallel.distributed.DistributedDataParallel = DistributedDataParallel

# ---------------------------------------------------------------- optim
optim = types.ModuleType("torch.optim")
optim.optimizer = types.ModuleType("torch.optim.optimizer")
_OPRE, _OPOST = [], []
optim.optimizer.register_optimizer_step_pre_hook = lambda fn: (_OPRE.append(fn), _Handle(_OPRE, fn))[1]
optim.optimizer.register_optimizer_step_post_hook = lambda fn: (_OPOST.append(fn), _Handle(_OPOST, fn))[1]


class Optimizer:
    """Adam-like: two state tensors the size of each parameter, made at the first step."""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}

    def step(self, closure=None):
        for h in list(_OPRE):
            h(self, (), {})
        if closure is not None:
            closure()
        for p in self.param_groups[0]["params"]:
            if p not in self.state:
                self.state[p] = {"exp_avg": Tensor(p.nbytes), "exp_avg_sq": Tensor(p.nbytes)}
        tmp = Tensor(sum(p.nbytes for p in self.param_groups[0]["params"]) // 4 or 512)
        tmp.free()
        for h in list(_OPOST):
            h(self, (), {})

    def zero_grad(self, set_to_none=True):
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                p.grad.free()
                p.grad = None


optim.Optimizer = Optimizer


class WrappingOptimizer(Optimizer):
    """Like accelerate's AcceleratedOptimizer: its step runs the inner optimizer's step."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def param_groups(self):
        return self.inner.param_groups

    @property
    def state(self):
        return self.inner.state

    def step(self, closure=None):
        for h in list(_OPRE):
            h(self, (), {})
        self.inner.step(closure)
        for h in list(_OPOST):
            h(self, (), {})

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none)


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
        _A["profiling"] = True

    def step(self):
        act = self.schedule(self.step_num)
        self.step_num += 1
        if act == "save" and self.on_trace_ready:
            self.on_trace_ready(self)

    def stop(self):
        _A["profiling"] = False

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


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    _need()  # the fake backend leaves the list as it was


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None, use_batch=False):
    _need()  # PyTorch 2.11's signature (use_batch: pipelining's shape inference)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False):
    _need()
    for i in range(len(object_list)):
        object_list[i] = b"\x00garbage"


for _n, _f in dict(init_process_group=init_process_group, get_rank=get_rank, get_world_size=get_world_size,
                   get_backend=get_backend, is_initialized=lambda: bool(_PG), is_available=lambda: True,
                   all_reduce=_noop, barrier=_noop, broadcast=_noop, all_gather_into_tensor=_noop,
                   reduce_scatter_tensor=_noop, broadcast_object_list=broadcast_object_list, all_gather_object=all_gather_object,
                   send_object_list=send_object_list, recv_object_list=recv_object_list,
                   Backend=Backend, HashStore=HashStore).items():
    setattr(c10d, _n, _f)
    setattr(distributed, _n, _f)
distributed.distributed_c10d = c10d

# FSDP2 (fully_shard), as much as the tensor inventories read: the module's
# class becomes FSDP<Class>, each parameter a sharded DTensor parameter (its
# local shard is itself here) owned by an FSDPParam that, between unshard()
# (before the module's forward) and reshard(), puts an unsharded copy on
# the module; gradients land on the shards.
distributed.fsdp = types.ModuleType("torch.distributed.fsdp")
distributed._composable_state = types.ModuleType("torch.distributed._composable_state")


class _ShardedParam(Parameter):
    @property
    def _local_tensor(self):
        return self


class FSDPParam:
    def __init__(self, module, name, fqn):
        self._module_info = types.SimpleNamespace(module=module, param_name=name)
        self._param_fqn = fqn
        old = module._params[name]
        self.sharded_param = _ShardedParam(old.n, old.dtype)
        old.free()
        self._unsharded_param = None
        self._set(self.sharded_param)

    def _set(self, p):
        m = self._module_info.module
        m._params[self._module_info.param_name] = p
        object.__setattr__(m, self._module_info.param_name, p)

    def unshard(self):
        if self._unsharded_param is None:
            sp = self.sharded_param
            self._unsharded_param = Parameter(sp.n, sp.dtype)
            self._set(self._unsharded_param)

    def reshard(self):
        up = self._unsharded_param
        if up is not None:
            if up.grad is not None:  # reduce-scatter into the shard's gradient
                if self.sharded_param.grad is None:
                    self.sharded_param.grad = Tensor(self.sharded_param.nbytes, self.sharded_param.dtype)
                up.grad.free()
            up.free()
            self._unsharded_param = None
            self._set(self.sharded_param)


def fully_shard(module):
    paths = {id(m): p for p, m in module.named_modules()}
    group = types.SimpleNamespace(fsdp_params=[FSDPParam(module, k, k) for k in list(module._params)])
    module.__dict__["_fake_fsdp_state"] = types.SimpleNamespace(_fsdp_param_group=group)
    cls = type(module)

    def call(self, *args):
        for fp in group.fsdp_params:
            fp.unshard()
        return cls.__call__(self, *args)

    module.__class__ = type("FSDP" + cls.__name__, (cls,), {"__call__": call, "__hash__": cls.__hash__})
    del paths
    return module


def _reshard_all(root):
    for m in root.modules():
        st = m.__dict__.get("_fake_fsdp_state")
        if st is not None:
            for fp in st._fsdp_param_group.fsdp_params:
                fp.reshard()


distributed.fsdp.fully_shard = fully_shard
distributed.fsdp.reshard_all = _reshard_all  # stands for FSDP2's post-backward hooks
distributed._composable_state._get_module_state = lambda m: m.__dict__.get("_fake_fsdp_state")

import sys as _sys

for _m in (_C, _C._distributed_c10d, distributed, c10d, distributed.fsdp, distributed._composable_state, cuda, cuda.memory, autograd, autograd.profiler, nn, nn.modules,
           nn.modules.module, nn.parallel, nn.parallel.distributed, optim, optim.optimizer, profiler):
    _sys.modules[_m.__name__] = _m

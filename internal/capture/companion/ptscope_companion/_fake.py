"""`ptscope run --no-gpu`: run an unmodified training command without a GPU.

Every tensor the program puts on CUDA becomes a *fake* tensor (PyTorch's
FakeTensorMode: shapes, dtypes and strides, no data, no compute). A memory
tracker (a TorchDispatchMode above the fake mode) counts each new storage that
was meant for the GPU with the caching allocator's rounding (512-byte
multiples) and frees it when the storage dies, so torch.cuda.memory_allocated,
max_memory_allocated and reset_peak_memory_stats answer from the tracker and
ptscope's usual phases (forward/backward/optimizer) get before/after/peak
numbers.

Fake tensors live on the CPU device here: autograd's engine needs an
initialised CUDA context for CUDA-device tensors (pytorch#92627), so the
tracker rewrites every CUDA device argument to CPU and remembers which
storages stand for GPU memory. CUDA autocast is emulated for the common
functions (CUDA's fp32 and lower-precision lists), and
F.scaled_dot_product_attention runs the kernel CUDA would pick (flash for
fp16/bf16, memory-efficient otherwise). What this cannot see: the CUDA
context, cuBLAS workspaces, the allocator's cache and fragmentation (reserved
is reported equal to allocated), and memory allocated outside the dispatcher.
"""
import contextlib
import json
import os
import sys
import threading
import types
import weakref

import torch

from . import log_once, write_atomic
from ._capture import Capture

_ROUND = 512
_FAKE_TOTAL = 80 << 30  # the device size reported to the program (PTSCOPE_FAKE_DEVICE_BYTES overrides)

aten = torch.ops.aten

# CUDA autocast policies (aten/src/ATen/autocast_mode.cpp), at the level of
# the Python functions a model calls.
_F = torch.nn.functional


def _funcs(spec):
    out = set()
    for mod, names in spec:
        for n in names.split():
            f = getattr(mod, n, None)
            if f is not None:
                out.add(f)
    return out


_LOWER = _funcs(((_F, "linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d prelu"),
                 (torch, "matmul mm bmm addmm baddbmm addbmm mv addmv conv1d conv2d conv3d prelu chain_matmul"),
                 (torch.Tensor, "matmul __matmul__ mm bmm")))
_FP32 = _funcs(((_F, "layer_norm group_norm rms_norm softmax log_softmax cross_entropy nll_loss mse_loss l1_loss "
                     "smooth_l1_loss huber_loss kl_div binary_cross_entropy_with_logits cosine_similarity softplus "
                     "poisson_nll_loss"),
                (torch, "softmax log_softmax exp log log2 log10 log1p expm1 rsqrt reciprocal pow cumsum cumprod "
                        "logsumexp prod norm cdist layer_norm group_norm"),
                (torch.Tensor, "softmax log_softmax pow logsumexp")))
_SDPA = getattr(_F, "scaled_dot_product_attention", None)


def _is_cuda(d):
    if d is None:
        return False
    if isinstance(d, torch.device):
        return d.type == "cuda"
    if isinstance(d, str):
        return d == "cuda" or d.startswith("cuda:")
    return False


def _rounded(n):
    n = int(n)
    return 0 if n <= 0 else (n + _ROUND - 1) // _ROUND * _ROUND


class Tracker:
    """Counts GPU-standing storages: current, peak, per module."""

    def __init__(self):
        self.live = {}  # storage key -> bytes
        self.current = 0
        self.peak = 0
        self.module_of = {}  # storage key -> module path (forward allocations)
        self.module_live = {}  # module path -> bytes alive now
        self.module_peak = {}  # module path -> bytes alive at the last new peak
        self.module_total = {}  # module path -> bytes ever allocated in its forward
        self.lock = threading.RLock()  # free() runs from finalizers, possibly inside add()
        self.capture = None
        self.unsupported = []
        self.items = 0

    def add(self, st, module):
        key = st._cdata
        if key in self.live:
            return
        n = _rounded(st.nbytes())
        with self.lock:
            self.live[key] = n
            self.current += n
            if module:
                self.module_of[key] = module
                self.module_live[module] = self.module_live.get(module, 0) + n
                self.module_total[module] = self.module_total.get(module, 0) + n
            if self.current > self.peak:
                self.peak = self.current
                self.module_peak = dict(self.module_live)
        try:
            weakref.finalize(st, self.free, key)
        except TypeError:
            pass

    def free(self, key):
        with self.lock:
            n = self.live.pop(key, None)
            if n is None:
                return
            self.current -= n
            m = self.module_of.pop(key, None)
            if m is not None:
                self.module_live[m] = self.module_live.get(m, 0) - n

    def is_gpu(self, t):
        try:
            return t.untyped_storage()._cdata in self.live
        except Exception:
            return False

    def reset_peak(self):
        with self.lock:
            self.peak = self.current
            self.module_peak = dict(self.module_live)


def _leaves(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _leaves(v, out)
    return out


def _make_dispatch_mode(tracker):
    from torch.utils._python_dispatch import TorchDispatchMode

    try:
        from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    except Exception:  # pragma: no cover
        DataDependentOutputException = DynamicOutputShapeException = RuntimeError
    try:
        from torch._subclasses.fake_tensor import UnsupportedOperatorException
    except Exception:  # pragma: no cover
        UnsupportedOperatorException = NotImplementedError

    scalar = aten._local_scalar_dense.default
    try:
        from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily as real_ok
    except Exception:  # pragma: no cover
        FakeTensor, real_ok = None, None

    def _all_real(args, kwargs):
        """Every tensor argument is a real tensor (made outside the fake mode:
        a DeviceMesh's mesh, data loaded through numpy), and there is one."""
        ts = _leaves(kwargs, _leaves(args, []))
        return bool(ts) and not any(isinstance(t, FakeTensor) or tracker.is_gpu(t) for t in ts)

    class MemoryTracker(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "namespace", "") == "profiler":
                return func(*args, **kwargs)  # record_function ranges: no tensors
            gpu = False
            if "device" in kwargs and _is_cuda(kwargs["device"]):
                kwargs = dict(kwargs, device=torch.device("cpu"))
                gpu = True
            if kwargs.get("pin_memory"):
                kwargs = dict(kwargs, pin_memory=False)
            if real_ok is not None and not gpu and _all_real(args, kwargs):
                with real_ok():
                    return func(*args, **kwargs)
            if func is scalar:
                try:
                    return func(*args, **kwargs)
                except DataDependentOutputException:
                    tracker.items += 1
                    log_once("fake item", "--no-gpu: a tensor's value was read (.item(), bool(), a Python branch on a "
                             "tensor); fake tensors hold no data, so ptscope answers 1 (logged once)")
                    t = args[0]
                    return True if t.dtype == torch.bool else (1.0 if t.is_floating_point() else 1)
            ins = _leaves(args, [])
            _leaves(kwargs, ins)
            if not gpu:
                for t in ins:
                    if tracker.is_gpu(t):
                        gpu = True
                        break
            try:
                out = func(*args, **kwargs)
            except (DynamicOutputShapeException, UnsupportedOperatorException, DataDependentOutputException) as err:
                name = str(func).split(".default")[0]
                if name not in tracker.unsupported:
                    tracker.unsupported.append(name)
                raise RuntimeError(
                    "ptscope --no-gpu: %s cannot run on fake tensors (%s: %s). Its output depends on tensor values "
                    "(nonzero, masked_select, unique, boolean-mask indexing, MoE routing) or it has no fake "
                    "implementation. Workaround: make the shape static for the simulation (e.g. index with a fixed "
                    "capacity), run that part outside the training step, or measure on a GPU (ptscope run without "
                    "--no-gpu)." % (name, type(err).__name__, str(err).splitlines()[0] if str(err) else "")) from err
            if gpu:
                module = None
                cap = tracker.capture
                if cap is not None and cap.stack and threading.get_ident() == cap.main_ident:
                    m = cap.stack[-1]
                    module = cap.names.get(m) or type(m).__name__
                ins_keys = set()
                for t in ins:
                    try:
                        ins_keys.add(t.untyped_storage()._cdata)
                    except Exception:
                        pass
                for t in _leaves(out, []):
                    try:
                        st = t.untyped_storage()
                    except Exception:
                        continue
                    if st._cdata in ins_keys and st._cdata not in tracker.live:
                        continue  # aliases a CPU input (a view, an in-place op)
                    tracker.add(st, module)
            return out

    return MemoryTracker


def _make_function_mode(tracker):
    from torch.overrides import TorchFunctionMode

    def autocast_dtype():
        try:
            if torch.is_autocast_enabled("cuda"):
                return torch.get_autocast_dtype("cuda")
        except TypeError:  # torch < 2.4: the un-typed API is CUDA's
            if torch.is_autocast_enabled():
                return torch.get_autocast_gpu_dtype()
        return None

    def cast(x, dtype):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype and x.dtype != torch.float64:
            return x.to(dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(cast(v, dtype) for v in x)
        return x

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        """The kernel CUDA picks: flash for fp16/bf16 without a mask, else memory-efficient."""
        if enable_gqa:
            return None
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        try:
            if q.dtype in (torch.float16, torch.bfloat16) and attn_mask is None and q.shape[-1] <= 256:
                return aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False, scale=scale)[0]
            return aten._scaled_dot_product_efficient_attention(q, k, v, attn_mask, grad, dropout_p, is_causal,
                                                                scale=scale)[0]
        except Exception as err:
            log_once("fake sdpa", "--no-gpu: the CUDA attention kernel could not run on fake tensors (%r); "
                     "scaled_dot_product_attention falls back to its CPU choice" % (err,))
            return None

    class DeviceMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            dtype = autocast_dtype()
            if dtype is not None:
                if func in _LOWER:
                    args, kwargs = cast(args, dtype), {k: cast(v, dtype) for k, v in kwargs.items()}
                elif func in _FP32:
                    args = cast(args, torch.float32)
                elif func is _SDPA:
                    args = cast(args, dtype)
            if func is _SDPA and _SDPA is not None:
                out = sdpa(*args, **kwargs)
                if out is not None:
                    return out
            if func is torch.Tensor.pin_memory:
                return args[0]
            return func(*args, **kwargs)

    return DeviceMode


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


def _patch_cuda(torch, tracker, total):
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


def _patch_swap_tensors(torch, tracker):
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


def _patch_foreach_default(torch):
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


class FakeCapture(Capture):
    """Capture's phases and files, with the tracker's numbers."""

    def __init__(self, cfg, bundle, tracker, total):
        super().__init__(cfg, bundle)
        self.tracker = tracker
        self.total = total
        self.param_bytes = {}  # module path -> its own parameters' bytes (learned at the first forward)

    def _learn_names(self, root):
        known = root in self.names
        owner = super()._learn_names(root)
        if known:
            return owner
        try:
            for m, name in list(self.names.items()):
                if name not in self.param_bytes:
                    self.param_bytes[name] = sum(_rounded(p.untyped_storage().nbytes())
                                                 for p in m.parameters(recurse=False))
        except Exception as err:
            log_once("fake params", "--no-gpu: parameter sizes per module unavailable (%r)" % (err,))
        return owner

    def _want_global(self):
        return True  # the per-module totals need every module call, and costs here are not the run's

    def _stats(self):
        t = self.tracker
        return t.current, t.current, t.peak, t.peak

    def _device_facts(self):
        return {"device_name": "fake GPU (ptscope --no-gpu)", "device_total_memory_bytes": self.total,
                "device_capability": "9.0"}

    def start(self):
        self.device = 0
        self._collect_facts()
        self.features["fake_tensors"] = True
        self.inv_enabled = False  # fake tensors have no device addresses
        self.facts["simulated"] = True
        if self.cfg.get("trace"):
            log_once("fake trace", "--no-gpu: --trace is ignored (fake tensors launch no kernels)")
        self._guard("phase hooks", self._install_hooks)
        self.set_metadata = None  # allocation metadata needs the real allocator
        import atexit

        atexit.register(self.finish)

    def snapshot(self, label, force=False):
        return None

    def _start_profiler(self):
        return None

    def _sample(self):
        a, r, pa, pr = self._stats()
        rec = {"time_us": int(__import__("time").time() * 1e6), "rank": self.rank, "step": self.step,
               "phase": self.phase.name if self.phase else None, "allocated_bytes": a, "reserved_bytes": r,
               "max_allocated_bytes": pa, "max_reserved_bytes": pr, "device_total_bytes": self.total}
        if not self.materialized and not self.materialize():
            return
        self.live.write(rec)
        self.live.flush()

    def _monitor(self):
        return None

    def finish(self):
        if self.finished or self.disabled:
            return
        super().finish()
        if self.dir:
            self._guard("modules.json", self._write_modules)
            self._guard("simulation.json", self._write_simulation)

    def _write_modules(self):
        t = self.tracker
        params = self.param_bytes
        names = sorted(set(params) | set(t.module_total))
        rows = [{"module": n, "parameter_bytes": params.get(n, 0),
                 "live_at_peak_bytes": max(t.module_peak.get(n, 0), 0),
                 "forward_allocated_bytes": t.module_total.get(n, 0)} for n in names]
        write_atomic(os.path.join(self.dir, "modules.json"), json.dumps(
            {"schema_version": 1, "peak_allocated_bytes": t.peak,
             "note": "live_at_peak: bytes allocated inside that module's own forward (not its children's) still "
                     "alive at the run's peak; parameters counted once, with 512-byte rounding",
             "modules": rows}, indent=1))

    def _write_simulation(self):
        t = self.tracker
        facts = {"mode": "fake", "world_size": 1, "rank": self.rank, "backend": None}
        sim = _simulation()
        if sim is not None:  # --no-gpu --simulate-world-size: the fake process group's facts too
            facts.update(sim.facts)
            facts["mode"] = "fake"
        problems = list(facts.get("problems") or [])
        if t.items:
            problems.append("--no-gpu: %d tensor value read(s) were answered with 1" % t.items)
        facts.update(unsupported_ops=t.unsupported, values_read=t.items, problems=problems)
        write_atomic(os.path.join(self.dir, "simulation.json"), json.dumps(facts, indent=1))


def _simulation():
    from . import _STATE

    return _STATE.get("sim")


def start(torch_mod, cfg, bundle):
    """Enter fake-tensor mode for the whole program; returns the FakeCapture."""
    try:
        total = int(os.environ.get("PTSCOPE_FAKE_DEVICE_BYTES") or _FAKE_TOTAL)
    except ValueError:
        total = _FAKE_TOTAL
    from torch._subclasses.fake_tensor import FakeTensorMode

    tracker = Tracker()
    _patch_cuda(torch, tracker, total)
    _patch_foreach_default(torch)
    _patch_swap_tensors(torch, tracker)
    cap = FakeCapture(cfg, bundle, tracker, total)
    tracker.capture = cap
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    fake.__enter__()
    mode = _make_dispatch_mode(tracker)()
    mode.__enter__()
    fmode = _make_function_mode(tracker)()
    fmode.__enter__()
    cap.start()
    log_once("fake start", "--no-gpu: CUDA tensors are fake (no data, no compute); memory is counted by ptscope's "
             "tracker with 512-byte rounding. Not counted: CUDA context, cuBLAS workspaces, allocator cache")
    return cap

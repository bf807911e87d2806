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
storages stand for GPU memory. So that code which allocates "like" a tensor
(torch.empty(n, device=x.device), as FSDP2 makes its all-gather outputs)
still allocates GPU memory, x.device of a fake CUDA tensor is a marker
object equal to the CPU device, which the function mode turns back into
CUDA; x.to("cuda") of a fake CUDA tensor returns it, as on a GPU. Storages
resized in place (FSDP's resize_(0) and resize_(n) of its unsharded
parameters) count their current size. Tensor subclasses that dispatch their
own ops (DTensor) are left to do so, so the ops on their local tensors are
counted. CUDA autocast is emulated for the common
functions (CUDA's fp32 and lower-precision lists), and
F.scaled_dot_product_attention runs the kernel CUDA would pick (flash for
fp16/bf16, memory-efficient otherwise). What this cannot see: the CUDA
context, cuBLAS workspaces, the allocator's cache and fragmentation (reserved
is reported equal to allocated), and memory allocated outside the dispatcher.
"""
import json
import os
import threading

import torch

from . import log_once, write_atomic
from ._capture import Capture
from ._fake_patches import (patch_cuda, patch_fake_device, patch_foreach_default, patch_storage_resize,
                            patch_swap_tensors)
from ._fake_rules import Tracker, device_type, foreign_subclass, retarget, rounded as _rounded, site as _site

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

    plain = (torch.Tensor, torch.nn.Parameter)
    infra = (FakeTensor,) if FakeTensor is not None else ()
    get_mode = getattr(torch._C, "_get_dispatch_mode", None)
    fake_key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)

    def other_fake_mode():
        """Another fake mode than the program's runs: DTensor's sharding
        propagation runs ops on fake tensors of global shapes, which stand
        for no memory."""
        if get_mode is None or fake_key is None or tracker.fake is None:
            return False
        try:
            m = get_mode(fake_key)
        except Exception:
            return False
        return m is not None and m is not tracker.fake

    resizing = ("resize_", "resize_as_", "resize_storage_bytes_", "set_")

    def count_outputs(func, ins, out):
        module = None
        cap = tracker.capture
        if cap is not None and cap.stack and threading.get_ident() == cap.main_ident:
            m = cap.stack[-1]
            module = cap.names.get(m) or type(m).__name__
        where = _site(str(func), 1) if tracker.sites else None
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
            tracker.add(st, module, where)  # an input's storage resized by an out= op counts its new size
        if getattr(func, "__name__", "").split(".")[0] in resizing:  # in-place resizes that return nothing (inductor's)
            for t in ins:
                try:
                    tracker.resized(t.untyped_storage())
                except Exception:
                    pass

    def dispatch(func, args, kwargs):
        if getattr(func, "namespace", "") == "profiler":
            return func(*args, **kwargs)  # record_function ranges: no tensors
        gpu = False
        if "device" in kwargs and device_type(kwargs["device"]) == "cuda":
            kwargs = dict(kwargs, device=torch.device("cpu"))
            gpu = True
        if kwargs.get("pin_memory"):
            kwargs = dict(kwargs, pin_memory=False)
        if other_fake_mode():
            return func(*args, **kwargs)
        ins = _leaves(args, [])
        _leaves(kwargs, ins)
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
            count_outputs(func, ins, out)
        return out

    tls = tracker.tls

    class MemoryTracker(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if types and foreign_subclass(types, plain, infra):
                # DTensor and other wrapper subclasses run their own ops; their
                # inner tensors' ops come back through this mode and are counted
                return NotImplemented
            tls.depth = getattr(tls, "depth", 0) + 1  # the function mode leaves devices alone in here
            try:
                return dispatch(func, args, kwargs or {})
            finally:
                tls.depth -= 1

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

    marker, gpu_dev, host = tracker.marker, torch.device("cuda", 0), torch.device("cpu")
    to, cuda = torch.Tensor.to, torch.Tensor.cuda
    tls = tracker.tls
    itself = object()

    def devices(func, args, kwargs):
        """The call with its device arguments for the GPU (see retarget), itself, or None."""
        if func is cuda and args and tracker.is_gpu(args[0]):
            return itself
        moving = func is to and bool(args) and tracker.is_gpu(args[0])
        return retarget(args, kwargs, marker, gpu_dev, host, moving)

    class DeviceMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if marker is not None and getattr(tls, "depth", 0) == 0:
                r = devices(func, args, kwargs)
                if r is itself:
                    return args[0]  # .cuda() of a tensor on the GPU
                if r is not None:
                    args, kwargs = r
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
                    # a DTensor parameter (FSDP2's sharded one) counts its local shard
                    self.param_bytes[name] = sum(_rounded(getattr(p, "_local_tensor", p).untyped_storage().nbytes())
                                                 for p in m.parameters(recurse=False))
        except Exception as err:
            log_once("fake params", "--no-gpu: parameter sizes per module unavailable (%r)" % (err,))
        return owner

    def _install_hooks(self):
        super()._install_hooks()
        # allocation metadata (module paths on allocations) needs the real
        # allocator: the tracker attributes allocations to modules itself
        self.set_metadata = None
        self.mod_meta = False
        self.features["memory_metadata"] = False
        self.features["backward_module_metadata"] = False

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
            if self.tracker.sites:
                self._guard("fake_peak.json", self._write_sites)

    def _write_sites(self):
        """PTSCOPE_SIM_DEBUG: what was alive at the peak, by source line and op."""
        t = self.tracker
        write_atomic(os.path.join(self.dir, "fake_peak.json"), json.dumps(
            {"peak_allocated_bytes": t.peak, "resizes": t.resizes, "sites": t.top_sites()}, indent=1))

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
        if sim is not None:
            sim.write_debug(self.dir)


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

    tracker = Tracker(sites=bool(os.environ.get("PTSCOPE_SIM_DEBUG")))
    patch_cuda(torch, tracker, total)
    patch_storage_resize(torch, tracker)
    patch_fake_device(torch, tracker)
    patch_foreach_default(torch)
    patch_swap_tensors(torch, tracker)
    cap = FakeCapture(cfg, bundle, tracker, total)
    tracker.capture = cap
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    tracker.fake = fake
    fake.__enter__()
    mode = _make_dispatch_mode(tracker)()
    mode.__enter__()
    fmode = _make_function_mode(tracker)()
    fmode.__enter__()
    cap.start()
    log_once("fake start", "--no-gpu: CUDA tensors are fake (no data, no compute); memory is counted by ptscope's "
             "tracker with 512-byte rounding. Not counted: CUDA context, cuBLAS workspaces, allocator cache")
    return cap

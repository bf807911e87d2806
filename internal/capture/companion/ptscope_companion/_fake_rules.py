"""The parts of `ptscope run --no-gpu` that need no torch: the memory
tracker's accounting and the rules that decide which tensors stand for GPU
memory. _fake applies them (testdata/fake_rules.py tests them).

The tracker counts storages, not tensors: views of one storage count once,
with the caching allocator's 512-byte rounding. A storage is counted from the
op that made it until it dies, at its current size: a storage resized in
place (FSDP frees and re-allocates its unsharded parameters with
untyped_storage().resize_(0) and resize_(n), keeping the tensors that alias
them) counts what it holds now."""
import sys
import threading
import weakref

ROUND = 512


def rounded(n):
    n = int(n)
    return 0 if n <= 0 else (n + ROUND - 1) // ROUND * ROUND


def device_type(d):
    """"cuda", "cpu", ... of a device argument (torch.device or str), else None."""
    if d is None:
        return None
    t = getattr(d, "type", None)
    if isinstance(t, str):
        return t
    if isinstance(d, str):
        return d.split(":", 1)[0]
    return None


def retarget(args, kwargs, marker, gpu, host, moving_gpu_tensor=False):
    """The device arguments of a Python-level call, rewritten; None where
    nothing changes. marker is what .device gives for a fake CUDA tensor: a
    CPU device (fake tensors live on the CPU device), equal to any other, but
    this very object, so that a tensor made on it (torch.empty(n,
    device=x.device), as FSDP makes its all-gather outputs) is made on the
    GPU. moving_gpu_tensor: the call is Tensor.to of a fake CUDA tensor,
    where a CUDA target (the marker, "cuda", cuda:0) is where the tensor
    already is, so the target becomes its own (CPU) device and the call
    returns the tensor itself, as on a GPU."""
    def fix(a):
        if a is marker:
            return host if moving_gpu_tensor else gpu
        if moving_gpu_tensor and device_type(a) == "cuda":
            return host
        return a

    if not moving_gpu_tensor and not any(a is marker for a in args) and not any(
            v is marker for v in kwargs.values()):
        return None
    new_args = tuple(fix(a) for a in args)
    new_kwargs = {k: fix(v) for k, v in kwargs.items()}
    if all(x is y for x, y in zip(new_args, args)) and all(new_kwargs[k] is kwargs[k] for k in kwargs):
        return None
    return new_args, new_kwargs


def foreign_subclass(types, plain, infra):
    """Whether the op's tensor types include a subclass that dispatches its
    own ops (DTensor, AsyncCollectiveTensor, quantized wrappers): the tracker
    lets it, so that the ops it runs on its inner tensors, which allocate the
    memory, pass through the tracker. plain: types handled as tensors (Tensor,
    Parameter); infra: PyTorch's own mode subclasses (FakeTensor)."""
    for t in types:
        if t in plain:
            continue
        try:
            if any(issubclass(t, b) for b in infra):
                continue
        except TypeError:
            continue
        if getattr(t, "_mode_key", None) is not None:
            continue
        return True
    return False


_SKIP = ("/torch/", "ptscope_companion", "<frozen", "/contextlib.py", "/functools.py")


def site(op, depth=2):
    """The first calling frame outside PyTorch and ptscope, with the op:
    "train.py:41 forward (aten.mm)"."""
    f = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if not any(s in fn for s in _SKIP):
            return "%s:%d %s (%s)" % (fn.rsplit("/", 2)[-1] if fn.count("/") > 1 else fn, f.f_lineno,
                                      f.f_code.co_name, op)
        f = f.f_back
    return "(torch) %s" % op


class Tracker:
    """Counts GPU-standing storages: current, peak, per module (and, with
    sites on, per source line)."""

    def __init__(self, sites=False):
        self.live = {}  # storage key -> bytes counted now
        self.current = 0
        self.peak = 0
        self.module_of = {}  # storage key -> module path (forward allocations)
        self.module_live = {}  # module path -> bytes alive now
        self.module_peak = {}  # module path -> bytes alive at the last new peak
        self.module_total = {}  # module path -> bytes ever allocated in its forward
        self.sites = sites
        self.site_of = {}  # storage key -> site (sites on)
        self.site_live = {}
        self.site_peak = {}
        self.resizes = 0  # in-place storage resizes that changed a count
        self.lock = threading.RLock()  # free() runs from finalizers, possibly inside add()
        self.tls = threading.local()  # depth: inside the dispatch mode's handler
        self.fake = None  # the program's FakeTensorMode
        self.marker = None  # what .device gives for a fake CUDA tensor (_fake._patch_fake_device)
        self.capture = None
        self.unsupported = []
        self.items = 0

    def _grow(self, key, delta):
        """Add delta bytes to key's storage (locked by the caller)."""
        self.live[key] += delta
        self.current += delta
        m = self.module_of.get(key)
        if m is not None:
            self.module_live[m] = self.module_live.get(m, 0) + delta
        s = self.site_of.get(key)
        if s is not None:
            self.site_live[s] = self.site_live.get(s, 0) + delta
        if self.current > self.peak:
            self.peak = self.current
            self.module_peak = dict(self.module_live)
            if self.sites:
                self.site_peak = dict(self.site_live)

    def add(self, st, module=None, where=None):
        """Count storage st (an object with _cdata and nbytes()). One that is
        counted already is brought to its current size."""
        key = st._cdata
        n = rounded(st.nbytes())
        with self.lock:
            old = self.live.get(key)
            if old is not None:
                if old != n:
                    self.resizes += 1
                    self._grow(key, n - old)
                return
            self.live[key] = 0
            if module:
                self.module_of[key] = module
                self.module_total[module] = self.module_total.get(module, 0) + n
            if where is not None:
                self.site_of[key] = where
            self._grow(key, n)
        try:
            weakref.finalize(st, self.free, key)
        except TypeError:
            pass

    def resized(self, st):
        """Storage st changed size in place (resize_): count its new size."""
        try:
            key = st._cdata
        except Exception:
            return
        if key in self.live:
            self.add(st)

    def free(self, key):
        with self.lock:
            n = self.live.pop(key, None)
            if n is None:
                return
            self.current -= n
            m = self.module_of.pop(key, None)
            if m is not None:
                self.module_live[m] = self.module_live.get(m, 0) - n
            s = self.site_of.pop(key, None)
            if s is not None:
                self.site_live[s] = self.site_live.get(s, 0) - n

    def is_gpu(self, t):
        """Whether tensor t's storage stands for GPU memory."""
        try:
            return t.untyped_storage()._cdata in self.live
        except Exception:
            return False

    def reset_peak(self):
        with self.lock:
            self.peak = self.current
            self.module_peak = dict(self.module_live)
            if self.sites:
                self.site_peak = dict(self.site_live)

    def top_sites(self, n=40):
        """The sites with the most bytes alive at the last peak."""
        rows = sorted(((b, s) for s, b in self.site_peak.items() if b > 0), reverse=True)[:n]
        return [{"site": s, "bytes": b} for b, s in rows]

"""What the training process's tensors are: parameters, gradients, optimizer
state, buffers, FSDP2's sharded and unsharded parameters, by storage address
and size (tensors.jsonl), so that analyze can label the allocator's blocks
exactly instead of guessing from the phase that allocated them.

An inventory walks the model's named parameters and buffers, each
parameter's .grad and every optimizer's .state; it costs a few microseconds a
tensor, so it is taken only at a handful of moments (the first forward, the
end of stacked steps, when an optimizer that stepped is freed, an OOM, exit)
and written only when it differs from the last one written. Optimizers are
held by weak reference (a tool must not keep the program's memory alive), so
a training function that returns frees its optimizer, and the state with it,
before exit: the inventory taken as it is finalized ("optimizer_freed") is the
last one that knows the final optimizer state. DTensors (FSDP2, tensor parallelism) are recorded by their
local shard, parameters with their DeviceMesh and placements. Imports torch lazily; every function is guarded by the caller."""
import json
import threading
import zlib

_MAX_BYTES = 64 << 20  # tensors.jsonl cap
_PART = 1000  # tensors per line (a record is under 300 bytes)


def _local(t):
    """The tensor that owns device memory: a DTensor's local shard, else t."""
    lt = getattr(t, "_local_tensor", None)
    if lt is not None:
        return lt, True
    return t, False


def _dtype(t):
    return str(getattr(t, "dtype", "")).replace("torch.", "")


def _ref(kind, name, module, t, extra=None):
    """The record of one tensor, or None if it holds no device memory."""
    lt, dt = _local(t)
    if not getattr(lt, "is_cuda", False):
        return None
    st = lt.untyped_storage()
    ptr = int(st.data_ptr())
    nbytes = int(st.nbytes())
    if ptr == 0 or nbytes == 0:
        return None
    rec = {"kind": kind, "name": name, "module": module, "dtype": _dtype(lt), "ptr": ptr, "bytes": nbytes}
    off = int(lt.data_ptr()) - ptr
    tb = int(lt.numel()) * int(lt.element_size())
    if off:
        rec["offset_bytes"] = off
    if tb != nbytes:
        rec["tensor_bytes"] = tb
    if dt:
        rec["dtensor"] = True
        if kind == "parameter":
            _mesh(rec, t)
    if extra:
        rec.update(extra)
    return rec


def _mesh(rec, t):
    """A DTensor parameter's DeviceMesh and placements: the layout (FSDP2 over
    one mesh dimension, tensor parallelism over another) that the local shard's
    size alone cannot tell."""
    try:
        mesh = t.device_mesh
        rec["mesh"] = [int(x) for x in mesh.shape]
        names = getattr(mesh, "mesh_dim_names", None)
        if names:
            rec["mesh_dims"] = [str(n) for n in names]
        rec["placements"] = [str(p) for p in t.placements]
    except Exception:  # an older DTensor: the record stays as it was
        pass


def _module_of(name):
    return name.rsplit(".", 1)[0] if "." in name else ""


def _fsdp_states(root):
    """(module path, FSDPParam) for every FSDP2 parameter under root."""
    get_state = None
    try:
        from torch.distributed._composable_state import _get_module_state as get_state  # noqa: F811
    except Exception:
        pass
    out = []
    for path, m in root.named_modules():
        st = None
        try:
            if get_state is not None:
                st = get_state(m)
            elif hasattr(m, "_get_fsdp_state"):
                st = m._get_fsdp_state()
        except Exception:
            st = None
        if st is None:
            continue
        groups = getattr(st, "_fsdp_param_groups", None)
        if groups is None:
            g = getattr(st, "_fsdp_param_group", None)
            groups = [g] if g is not None else []
        for g in groups:
            for fp in getattr(g, "fsdp_params", ()) or ():
                out.append((path, fp))
    return out


class Inventory:
    """Takes inventories of the process's tensors into tensors.jsonl."""

    def __init__(self, path, rank, device):
        self.path = path
        self.rank = rank
        self.device = device
        self.roots = []  # (naming root module, prefix) pairs: the models seen in forward
        self.optimizers = []  # optimizers seen stepping (weak references)
        self.opt_ids = set()  # their ids: a dying optimizer's weak reference may be cleared already
        self.lock = threading.Lock()  # an optimizer's finalizer may run on any thread
        self.last_sig = None
        self.size = 0
        self.closed = False
        self.fsdp = False
        self.count = 0

    def add_root(self, module):
        for m, _ in self.roots:
            if m is module:
                return
        self.roots.append((module, ""))

    def add_optimizer(self, opt):
        import weakref

        for r in self.optimizers:
            if r() is opt:
                return
        try:
            self.optimizers.append(weakref.ref(opt))
            self.opt_ids.add(id(opt))
        except TypeError:
            pass

    def dying(self, opt):
        """Whether opt, being finalized, is an optimizer seen stepping; forgets it."""
        if id(opt) not in self.opt_ids:
            return False
        self.opt_ids.discard(id(opt))
        self.optimizers = [r for r in self.optimizers if r() is not None and r() is not opt]
        return True

    def collect(self, extra=()):
        """The records, deduplicated by (kind, storage); extra: optimizers to
        walk besides the live ones (one being finalized)."""
        recs = []
        seen = set()
        names = {}  # id(param) -> (name, module)

        def add(r):
            if r is None:
                return
            key = (r["kind"], r["ptr"], r.get("offset_bytes", 0))
            if key in seen:
                return
            seen.add(key)
            recs.append(r)

        for root, _ in self.roots:
            if self.fsdp:
                # FSDP2 first: between its all-gather and its reshard a module's
                # parameters are the unsharded ones, so named_parameters
                # alone would take those for the model's own and miss the
                # shards (which the optimizer's state is keyed by)
                # named by the companion's root: FSDP2's _param_fqn is relative
                # to the root of its own tree, which need not be the model
                mpath = {id(m): p for p, m in root.named_modules()}
                for path, fp in _fsdp_states(root):
                    mi = getattr(fp, "_module_info", None)
                    owner = mpath.get(id(getattr(mi, "module", None)))
                    if owner is not None and getattr(mi, "param_name", None):
                        name = (owner + "." if owner else "") + str(mi.param_name)
                    else:
                        name = getattr(fp, "_param_fqn", None) or path
                    mod = _module_of(name)
                    sp = getattr(fp, "sharded_param", None)
                    if sp is not None:
                        names[id(sp)] = (name, mod)
                        add(_ref("parameter", name, mod, sp, {"fsdp": "sharded"}))
                        g = getattr(sp, "grad", None)
                        if g is not None:
                            add(_ref("gradient", name, mod, g))
                    up = getattr(fp, "_unsharded_param", None)
                    if up is not None:
                        add(_ref("parameter", name, mod, up, {"fsdp": "unsharded"}))
            for name, p in root.named_parameters():
                mod = _module_of(name)
                names.setdefault(id(p), (name, mod))
                add(_ref("parameter", name, mod, p, {"fsdp": "sharded"} if _local(p)[1] and self.fsdp else None))
                g = getattr(p, "grad", None)
                if g is not None:
                    add(_ref("gradient", name, mod, g))
            for name, b in root.named_buffers():
                add(_ref("buffer", name, _module_of(name), b))
        opts = [r() for r in self.optimizers]
        opts += [o for o in extra if not any(o is x for x in opts)]
        for oi, opt in enumerate(opts):
            if opt is None:
                continue
            state = getattr(opt, "state", None) or {}
            for gi, group in enumerate(getattr(opt, "param_groups", ()) or ()):
                for pi, p in enumerate(group.get("params", ())):
                    name, mod = names.get(id(p), (None, ""))
                    if name is None:
                        name = "optimizer%d.group%d.param%d" % (oi, gi, pi)
                        add(_ref("parameter", name, "", p))
                        g = getattr(p, "grad", None)
                        if g is not None:
                            add(_ref("gradient", name, "", g))
                    st = state.get(p) if hasattr(state, "get") else None
                    if not st:
                        continue
                    for k, v in st.items():
                        if hasattr(v, "untyped_storage"):
                            add(_ref("optimizer_state", name + "." + str(k), mod, v))
        return recs

    def take(self, at, step, now_us, extra=()):
        """Write an inventory if it differs from the last one; returns the record count."""
        with self.lock:
            return self._take(at, step, now_us, extra)

    def _take(self, at, step, now_us, extra):
        if self.closed:
            return 0
        recs = self.collect(extra)
        sig = zlib.crc32(json.dumps([(r["kind"], r["name"], r["ptr"], r["bytes"]) for r in recs]).encode())
        if sig == self.last_sig:
            return 0
        self.last_sig = sig
        # lines stay far below the readers' 1 MiB line limit: big models'
        # inventories are split into parts sharing time_us and at
        parts = [recs[i:i + _PART] for i in range(0, len(recs), _PART)] or [[]]
        for i, part in enumerate(parts):
            rec = {"time_us": now_us, "rank": self.rank, "device": self.device, "step": step, "at": at,
                   "tensors": part}
            if len(parts) > 1:
                rec["part"], rec["parts"] = i, len(parts)
            self._write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.count += 1
        return len(recs)

    def region(self, kind, step, start_us, end_us, before, after):
        """A span of time whose allocations have one role (DDP's buckets)."""
        if self.closed:
            return
        self._write(json.dumps({"region": kind, "rank": self.rank, "device": self.device, "step": step,
                                "start_time_us": start_us, "end_time_us": end_us,
                                "allocated_before_bytes": before, "allocated_after_bytes": after},
                               separators=(",", ":")) + "\n")

    def _write(self, line):
        if self.size + len(line) > _MAX_BYTES:
            self.closed = True
            raise RuntimeError("tensors.jsonl reached %d bytes; no more inventories are written" % _MAX_BYTES)
        with open(self.path, "a") as f:
            f.write(line)
        self.size += len(line)


def output_nodes(out):
    """The autograd nodes of a module's output tensors (first level of tuples,
    lists and dicts, which covers Hugging Face's ModelOutput)."""
    if out is None:
        return []
    fn = getattr(out, "grad_fn", None)
    if fn is not None:
        return [fn]
    vals = None
    if isinstance(out, (tuple, list)):
        vals = out
    elif isinstance(out, dict):
        vals = out.values()
    if vals is None:
        return []
    nodes = []
    for v in vals:
        fn = getattr(v, "grad_fn", None)
        if fn is not None:
            nodes.append(fn)
    return nodes

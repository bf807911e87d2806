"""`ptscope run --simulate-world-size N [--simulate-rank R]`: run one rank of an
N-rank job on one GPU. torch.distributed.init_process_group is redirected to
PyTorch's "fake" backend (a process group whose collectives return at once;
all-gathers copy this rank's input into every chunk) with a FakeStore, so DDP,
FSDP2, DeviceMesh-based tensor parallelism and pipeline stages build and run
as that one rank, and every buffer the framework allocates for a collective
(all-gather outputs, reduce-scatter inputs, pre-sized receive buffers) is a
real allocation of the right shape. Object collectives assume every rank looks
like this one. Imported only when the option is set; imports torch.distributed
lazily and feature-detects the fake backend."""
import json
import os
import sys
import threading

from . import log_once, write_atomic

# torch.distributed functions counted (and named in error messages)
COLLECTIVES = (
    "all_gather", "all_gather_coalesced", "all_gather_into_tensor", "all_gather_object", "all_reduce",
    "all_reduce_coalesced", "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "gather", "gather_object", "irecv", "isend", "recv", "recv_object_list", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send", "send_object_list",
    "monitored_barrier", "_reduce_scatter_base", "_all_gather_base",
)


class Simulation:
    """State of one simulated rank (one per process)."""

    def __init__(self, world_size, rank):
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.facts = {"mode": "simulate-world", "world_size": self.world_size, "rank": self.rank,
                      "backend": None, "requested_backend": None, "collectives": {}, "problems": []}
        self.last = None  # (op, "file:line") of the last collective called
        self.lock = threading.Lock()

    # ------------------------------------------------------------ bookkeeping
    def problem(self, key, msg):
        log_once("simulate " + key, msg)
        with self.lock:
            if msg not in self.facts["problems"]:
                self.facts["problems"].append(msg)

    def called(self, name, depth=2):
        where = None
        try:
            f = sys._getframe(depth)
            where = "%s:%d" % (f.f_code.co_filename, f.f_lineno)
        except Exception:
            pass
        with self.lock:
            c = self.facts["collectives"]
            c[name] = c.get(name, 0) + 1
            self.last = (name, where)

    def write(self, rank_dir):
        if rank_dir:
            write_atomic(os.path.join(rank_dir, "simulation.json"), json.dumps(self.facts, indent=1))

    # ------------------------------------------------------------ messages
    def explain(self, exc_type, exc, tb):
        """A one-paragraph explanation of an uncaught exception under simulation."""
        op = None
        try:
            import traceback

            for fr in reversed(traceback.extract_tb(tb)):
                fn = fr.filename.replace("\\", "/")
                if "/torch/distributed/" in fn:
                    op = "%s (%s:%d)" % (fr.name, fn.split("/torch/distributed/")[-1], fr.lineno)
                    break
        except Exception:
            pass
        parts = ["the program failed while ptscope simulated rank %d of %d on one GPU (--simulate-world-size): %s: %s"
                 % (self.rank, self.world_size, getattr(exc_type, "__name__", exc_type), str(exc).splitlines()[0] if str(exc) else "")]
        if op:
            parts.append("it was raised inside torch.distributed in %s" % op)
        if self.last:
            parts.append("the last collective called was torch.distributed.%s%s" % (
                self.last[0], " at " + self.last[1] if self.last[1] else ""))
        text = str(exc)
        if "invalid device ordinal" in text or "CUDA error: invalid device" in text:
            parts.append("the program picked a GPU by rank: pick it with LOCAL_RANK (ptscope sets LOCAL_RANK=0) "
                         "or torch.cuda.set_device(int(os.environ['LOCAL_RANK']))")
        else:
            parts.append("under the fake backend collectives exchange no data (outputs keep what they held; "
                         "all-gathers repeat this rank's shard), so code whose control flow depends on received "
                         "values (object broadcasts, data-dependent shapes, MoE token counts from all_to_all, "
                         "early-stopping flags) cannot be simulated; make that value rank-local for the simulation")
        return "; ".join(parts)


def _fake_store(dist):
    """A FakeStore (or a HashStore, which works the same for the fake backend)."""
    for mod, name in (("torch.testing._internal.distributed.fake_pg", "FakeStore"),
                      ("torch._C._distributed_c10d", "FakeStore")):
        try:
            m = __import__(mod, fromlist=[name])
            cls = getattr(m, name, None)
            if cls is not None:
                return cls, "%s.%s" % (mod, name)
        except Exception:
            continue
    hs = getattr(dist, "HashStore", None)
    if hs is not None:
        return hs, "torch.distributed.HashStore"
    return None, None


def _fake_backend_registered(dist):
    be = getattr(dist, "Backend", None)
    if be is None:
        return False
    if getattr(be, "FAKE", None):
        return True
    names = getattr(be, "backend_list", None) or []
    return "fake" in names or "fake" in (getattr(be, "_plugins", None) or {})


def _replace_everywhere(orig, new, name=None, prefix="torch.distributed"):
    """Replace module attributes bound to orig (`from ... import f` copies
    too); with name, only attributes of that name."""
    n = 0
    for mname, mod in list(sys.modules.items()):
        if mod is None or not (mname == prefix or mname.startswith(prefix + ".")):
            continue
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for k, v in list(d.items()):
            if v is orig and (name is None or k == name):
                try:
                    setattr(mod, k, new)
                    n += 1
                except Exception:
                    pass
    return n


def install(torch, cfg):
    """Redirect torch.distributed to the fake backend as rank R of world W.
    Returns the Simulation, or None when torch.distributed cannot simulate."""
    sim = Simulation(cfg.get("world_size", 1), cfg.get("rank", 0))
    try:
        import torch.distributed as dist
    except Exception as err:
        sim.problem("import", "torch.distributed cannot be imported (%r): nothing to simulate" % (err,))
        return sim
    if not dist.is_available():
        sim.problem("unavailable", "this PyTorch has no torch.distributed: --simulate-world-size has no effect")
        return sim
    store_cls, store_name = _fake_store(dist)
    if not _fake_backend_registered(dist):
        sim.problem("nobackend", "this PyTorch (%s) has no 'fake' process-group backend: --simulate-world-size needs "
                    "torch.testing._internal.distributed.fake_pg (PyTorch >= 2.1)" % torch.__version__)
        return sim
    if store_cls is None:
        sim.problem("nostore", "no FakeStore or HashStore in this PyTorch: --simulate-world-size cannot initialise")
        return sim
    sim.facts["store"] = store_name
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    orig_init = getattr(c10d, "init_process_group", None) or dist.init_process_group

    def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                           group_name="", pg_options=None, device_id=None, **kwargs):
        if (world_size not in (-1, None, sim.world_size)) or (rank not in (-1, None, sim.rank)):
            log_once("simulate args", "init_process_group(world_size=%s, rank=%s) overridden by --simulate-world-size "
                     "%d --simulate-rank %d" % (world_size, rank, sim.world_size, sim.rank))
        sim.facts["backend"] = "fake"
        sim.facts["requested_backend"] = None if backend is None else str(backend)
        kw = {"backend": "fake", "store": store_cls(), "world_size": sim.world_size, "rank": sim.rank}
        if timeout is not None:
            kw["timeout"] = timeout
        if group_name:
            kw["group_name"] = group_name
        return orig_init(**kw)

    init_process_group.__wrapped__ = orig_init
    init_process_group.__doc__ = orig_init.__doc__
    _replace_everywhere(orig_init, init_process_group)
    _patch_collectives(dist, sim)
    _patch_object_collectives(dist, sim)
    _patch_set_device(torch, sim)
    _install_excepthook(sim)
    return sim


def _patch_collectives(dist, sim):
    for name in COLLECTIVES:
        orig = getattr(dist, name, None)
        if orig is None or not callable(orig) or getattr(orig, "_ptscope_counted", False):
            continue
        sim_ = sim

        def make(orig=orig, name=name):
            def counted(*args, **kwargs):
                sim_.called(name)
                return orig(*args, **kwargs)

            counted.__wrapped__ = orig
            counted.__name__ = getattr(orig, "__name__", name)
            counted.__doc__ = getattr(orig, "__doc__", None)
            counted._ptscope_counted = True
            return counted

        if name.endswith("_object") or name.endswith("_object_list"):
            continue  # replaced below
        _replace_everywhere(orig, make(), name)


def _group_rank(dist, group, global_rank):
    try:
        if group is None:
            return global_rank
        return dist.get_group_rank(group, global_rank)
    except Exception:
        return global_rank


def _patch_object_collectives(dist, sim):
    """Object collectives pickle through tensors whose contents the fake
    backend never fills: emulate them for identical ranks instead."""

    def me():
        try:
            return dist.get_rank()
        except Exception:
            return sim.rank

    def all_gather_object(object_list, obj, group=None):
        sim.called("all_gather_object")
        for i in range(len(object_list)):
            object_list[i] = obj

    def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
        sim.called("gather_object")
        if object_gather_list is not None:
            for i in range(len(object_gather_list)):
                object_gather_list[i] = obj

    def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
        sim.called("broadcast_object_list")
        s = src if src is not None else group_src
        if s is not None and s != me():
            sim.problem("broadcast_object_list",
                        "torch.distributed.broadcast_object_list from rank %s: the simulated rank %d receives nothing "
                        "and keeps its own list %r" % (s, sim.rank, _short(object_list)))

    def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                            group_src=None):
        sim.called("scatter_object_list")
        if scatter_object_input_list:
            idx = min(_group_rank(dist, group, me()), len(scatter_object_input_list) - 1)
            scatter_object_output_list[0] = scatter_object_input_list[idx]
        else:
            sim.problem("scatter_object_list", "torch.distributed.scatter_object_list: the simulated rank %d receives "
                        "nothing from the source rank and keeps %r" % (sim.rank, _short(scatter_object_output_list)))

    def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
        sim.called("recv_object_list")
        sim.problem("recv_object_list", "torch.distributed.recv_object_list from rank %s: the simulated rank %d "
                    "receives nothing and keeps %r (pipeline shape exchange: pass the stage's input shapes "
                    "explicitly)" % (src, sim.rank, _short(object_list)))
        return sim.rank if src is None else src

    def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
        sim.called("send_object_list")

    for name, fn in (("all_gather_object", all_gather_object), ("gather_object", gather_object),
                     ("broadcast_object_list", broadcast_object_list), ("scatter_object_list", scatter_object_list),
                     ("recv_object_list", recv_object_list), ("send_object_list", send_object_list)):
        orig = getattr(dist, name, None)
        if orig is None:
            continue
        fn.__wrapped__ = orig
        fn.__doc__ = orig.__doc__
        _replace_everywhere(orig, fn, name)


def _short(v):
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _patch_set_device(torch, sim):
    """torch.cuda.set_device(i) for a GPU this machine lacks selects GPU 0."""
    cuda = getattr(torch, "cuda", None)
    orig = getattr(cuda, "set_device", None)
    if orig is None:
        return

    def set_device(device):
        try:
            idx = device if isinstance(device, int) else getattr(torch.device(device), "index", None)
            n = cuda.device_count()
            if idx is not None and n > 0 and (idx < 0 or idx >= n):
                log_once("simulate set_device", "torch.cuda.set_device(%r): this machine has %d GPU(s); the simulated "
                         "rank %d uses cuda:0" % (device, n, sim.rank))
                device = 0
        except Exception:
            pass
        return orig(device)

    set_device.__wrapped__ = orig
    set_device.__doc__ = orig.__doc__
    cuda.set_device = set_device


def _install_excepthook(sim):
    prev = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
                sim.problem("uncaught", sim.explain(exc_type, exc, tb))
        except Exception:
            pass
        prev(exc_type, exc, tb)

    sys.excepthook = hook

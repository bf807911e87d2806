"""`ptscope run --simulate-world-size N [--simulate-rank R|all]`: run one rank of
an N-rank job on one GPU. torch.distributed.init_process_group is redirected to
PyTorch's "fake" backend (a process group whose collectives return at once;
all-gathers copy this rank's input into every chunk) with a FakeStore, so DDP,
FSDP2, DeviceMesh-based tensor parallelism, pipeline stages and expert
parallelism build and run as that one rank, and every buffer the framework
allocates for a collective (all-gather outputs, reduce-scatter inputs, receive
buffers, all-to-all outputs) is a real allocation of the right shape.

What a simulated rank receives follows one rule: every rank is like this one.
Collectives whose outputs steer control flow get the values such a job would
produce (RULES below: all_to_all gives every source this rank's own chunk, so
token counts are this rank's counts as if all ranks routed alike; tensors
received from another rank read zeros, so indices stay in range and no NaN
appears; object collectives replay what earlier simulated ranks of the same
bundle sent, see Mailbox). Imported only when the option is set; imports
torch.distributed lazily and feature-detects the fake backend and every
signature it patches."""
import json
import os
import sys
import threading

from . import log_once, write_atomic

from ._simulate_rules import (  # noqa: F401 (re-exported for the tests)
    COLLECTIVES, IMBALANCE_RULE, RULES, Mailbox, alike_counts, binder, first_param, offsets, split_sizes)


class Simulation:
    """State of one simulated rank (one per process)."""

    def __init__(self, world_size, rank, imbalance=0.0, mailbox=None):
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.imbalance = float(imbalance or 0.0)
        self.mailbox = mailbox or Mailbox(None)
        self.facts = {"mode": "simulate-world", "world_size": self.world_size, "rank": self.rank,
                      "backend": None, "requested_backend": None, "collectives": {}, "faked": {}, "problems": []}
        if self.imbalance > 1:
            self.facts["imbalance"] = self.imbalance
        self.last = None  # (op, "file:line") of the last collective called
        self.last_sent = None  # the last object list this rank sent (send_object_list)
        self.last_received = None
        self.lock = threading.Lock()
        # PTSCOPE_SIM_DEBUG: how often each collective was called from where (simulate_debug.json)
        self.call_sites = {} if os.environ.get("PTSCOPE_SIM_DEBUG") else None

    def keep_broadcast(self):
        """Whether one more broadcast tensor may be kept (BROADCAST_KEPT_MAX)."""
        with self.lock:
            n = self.facts.get("broadcasts_kept", 0)
            if n >= BROADCAST_KEPT_MAX:
                return False
            self.facts["broadcasts_kept"] = n + 1
            return True

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
            if self.call_sites is not None:
                k = "%s %s" % (name, where)
                self.call_sites[k] = self.call_sites.get(k, 0) + 1
            if name in RULES and name not in self.facts["faked"]:
                rule = RULES[name]
                if name in ("all_to_all_single", "all_to_all") and self.imbalance > 1:
                    rule += IMBALANCE_RULE % self.imbalance
                self.facts["faked"][name] = rule

    def write(self, rank_dir):
        if rank_dir:
            write_atomic(os.path.join(rank_dir, "simulation.json"), json.dumps(self.facts, indent=1))
            self.write_debug(rank_dir)

    def write_debug(self, rank_dir):
        if self.call_sites is not None:
            write_atomic(os.path.join(rank_dir, "simulate_debug.json"),
                         json.dumps({"call_sites": self.call_sites}, indent=1, sort_keys=True))

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
            parts.append("if the command runs on real GPUs, the cause is the simulation: under the fake backend "
                         "collectives exchange no data (every rank is taken to be like this one: all-gathers repeat "
                         "this rank's shard, all-to-alls this rank's own chunk, received tensors read zeros), so code "
                         "whose control flow depends on values another rank computed (object broadcasts, "
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


def install(torch, cfg, bundle=None):
    """Redirect torch.distributed to the fake backend as rank R of world W.
    Returns the Simulation, or None when torch.distributed cannot simulate."""
    # What one simulated rank sends another is kept only where a later
    # rank of the same bundle can read it (--simulate-rank all or a list):
    # a rank simulated alone writes nothing.
    keep = bundle and len(cfg.get("ranks") or []) > 1
    box = Mailbox(os.path.join(bundle, ".ptscope", "simulate") if keep else None)
    sim = Simulation(cfg.get("world_size", 1), cfg.get("rank", 0), cfg.get("imbalance") or 0.0, box)
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
    bind_init = binder(orig_init)

    def init_process_group(*args, **kwargs):
        try:
            a = bind_init(args, kwargs)
        except TypeError:
            a = dict(kwargs)
        backend, world_size, rank = a.get("backend"), a.get("world_size", -1), a.get("rank", -1)
        if (world_size not in (-1, None, sim.world_size)) or (rank not in (-1, None, sim.rank)):
            log_once("simulate args", "init_process_group(world_size=%s, rank=%s) overridden by --simulate-world-size "
                     "%d --simulate-rank %d" % (world_size, rank, sim.world_size, sim.rank))
        sim.facts["backend"] = "fake"
        sim.facts["requested_backend"] = None if backend is None else str(backend)
        kw = {"backend": "fake", "store": store_cls(), "world_size": sim.world_size, "rank": sim.rank}
        if a.get("timeout") is not None:
            kw["timeout"] = a["timeout"]
        if a.get("group_name"):
            kw["group_name"] = a["group_name"]
        return orig_init(**kw)

    init_process_group.__wrapped__ = orig_init
    init_process_group.__doc__ = orig_init.__doc__
    _replace_everywhere(orig_init, init_process_group)
    _patch_new_group(dist, sim)
    _patch_collectives(torch, dist, sim)
    _patch_object_collectives(dist, sim)
    _patch_set_device(torch, sim)
    _install_excepthook(sim)
    return sim


def _patch_new_group(dist, sim):
    """A group asked for with its own backend (Megatron's gloo groups) would
    rendezvous through the store for real: it is a fake group too."""
    orig = getattr(dist, "new_group", None)
    if orig is None:
        return
    bind = binder(orig)

    def new_group(*args, **kwargs):
        try:
            a = bind(args, kwargs)
        except TypeError:
            return orig(*args, **kwargs)
        be = a.get("backend")
        if be is not None and str(be).lower() != "fake":
            a["backend"] = "fake"
            if "pg_options" in a:
                a["pg_options"] = None
            with sim.lock:
                sim.facts.setdefault("groups_made_fake", {})
                k = str(be)
                sim.facts["groups_made_fake"][k] = sim.facts["groups_made_fake"].get(k, 0) + 1
            return orig(**a)
        return orig(*args, **kwargs)

    new_group.__wrapped__ = orig
    new_group.__doc__ = orig.__doc__
    _replace_everywhere(orig, new_group, "new_group")


# ------------------------------------------------------------ tensor collectives
def _zero(torch, t):
    if isinstance(t, torch.Tensor) and t.numel():
        with torch.no_grad():
            t.zero_()


def _global_src(dist, a, key="src"):
    src = a.get(key)
    gsrc = a.get("group_" + key)
    if src is None and gsrc is not None:
        try:
            src = dist.get_global_rank(a.get("group") or dist.distributed_c10d._get_default_group(), gsrc)
        except Exception:
            src = None
    return src


def _post_receive(key):
    def post(sim, dist, torch, a):
        src = _global_src(dist, a, key)
        if src is not None and src == dist.get_rank():
            return
        _zero(torch, a.get("tensor"))
    return post


# A broadcast tensor of at most this many bytes is kept in the bundle's
# mailbox by its source rank, for the ranks simulated after it: small
# broadcasts carry decisions (Megatron broadcasts its do_train/do_valid/
# do_test flags from rank 0 and every other rank trains only if they say
# so), large ones carry data, whose values do not change memory.
BROADCAST_KEPT_BYTES = 64 << 10
# and at most this many per process, so that a loop broadcasting every step
# does not fill the bundle: later ones read zeros on the receiving ranks.
BROADCAST_KEPT_MAX = 4096


def _group_key(dist, group):
    """The same name for a group in every rank's process: its global ranks."""
    if group is None:
        return "all"
    try:
        return "g" + "-".join(str(r) for r in dist.get_process_group_ranks(group))
    except Exception:
        return "all"


def _post_broadcast(sim, dist, torch, a):
    t = a.get("tensor")
    if not isinstance(t, torch.Tensor) or not t.numel():
        return
    src = _global_src(dist, a)
    kept = t.numel() * t.element_size() <= BROADCAST_KEPT_BYTES
    me = dist.get_rank()
    if src is None or src == me:
        if kept and src is not None and sim.mailbox.root and sim.keep_broadcast():
            sim.mailbox.put("tensor", me, _group_key(dist, a.get("group")),
                            (str(t.dtype), tuple(t.shape), t.detach().cpu().reshape(-1).tolist()))
        return
    if kept:
        ok, got = sim.mailbox.get("tensor", src, _group_key(dist, a.get("group")))
        if ok and got[0] == str(t.dtype) and tuple(got[1]) == tuple(t.shape):
            with torch.no_grad():
                t.copy_(torch.tensor(got[2], dtype=t.dtype).reshape(t.shape))
            with sim.lock:
                sim.facts["broadcasts_replayed"] = sim.facts.get("broadcasts_replayed", 0) + 1
            return
    _zero(torch, t)


def _copy_rows(torch, dst, src):
    """dst[:k] = src[:k] along dim 0, the rest of dst zeros."""
    k = min(dst.shape[0], src.shape[0])
    if k and dst.shape[1:] == src.shape[1:]:
        dst.narrow(0, 0, k).copy_(src.narrow(0, 0, k))
    else:
        k = 0
    if k < dst.shape[0]:
        dst.narrow(0, k, dst.shape[0] - k).zero_()


def _post_all_to_all_single(sim, dist, torch, a):
    out, inp = a.get("output"), a.get("input")
    if not isinstance(out, torch.Tensor) or not isinstance(inp, torch.Tensor) or out.dim() == 0:
        return
    group = a.get("group")
    n, me = dist.get_world_size(group), dist.get_rank(group)
    if me < 0 or n <= 0:
        return
    osz = split_sizes(out.shape[0], n, a.get("output_split_sizes"))
    isz = split_sizes(inp.shape[0], n, a.get("input_split_sizes"))
    if osz is None or isz is None or len(osz) != n or len(isz) != n:
        return
    even = not a.get("output_split_sizes") and not a.get("input_split_sizes")
    with torch.no_grad():
        src = inp.narrow(0, offsets(isz)[me], isz[me])
        if even and sim.imbalance > 1 and out.dim() == 1 and not out.is_floating_point() and out.dtype != torch.bool:
            got = alike_counts(inp.tolist(), n, me, sim.imbalance)
            if got is not None and len(got) == out.shape[0]:
                out.copy_(torch.tensor(got, dtype=out.dtype, device=out.device))
                with sim.lock:
                    sim.facts["imbalance_applied"] = sim.facts.get("imbalance_applied", 0) + 1
                return
        if even and out.is_contiguous() and src.shape[0] == osz[0]:
            out.view(n, *src.shape).copy_(src.unsqueeze(0).expand(n, *src.shape))
            return
        for r, o in zip(offsets(osz), osz):
            _copy_rows(torch, out.narrow(0, r, o), src)


def _post_all_to_all(sim, dist, torch, a):
    outs, ins = a.get("output_tensor_list"), a.get("input_tensor_list")
    if not outs or not ins:
        return
    me = dist.get_rank(a.get("group"))
    if me < 0 or me >= len(ins):
        return
    src = ins[me]
    with torch.no_grad():
        for o in outs:
            if isinstance(o, torch.Tensor) and isinstance(src, torch.Tensor) and o.dim() and src.dim():
                _copy_rows(torch, o, src)


_POST = {
    "broadcast": _post_broadcast,
    "scatter": _post_receive("src"),
    "recv": _post_receive("src"),
    "irecv": _post_receive("src"),
    "all_to_all_single": _post_all_to_all_single,
    "all_to_all": _post_all_to_all,
}


def _patch_collectives(torch, dist, sim):
    for name in COLLECTIVES:
        orig = getattr(dist, name, None)
        if orig is None or not callable(orig) or getattr(orig, "_ptscope_counted", False):
            continue
        if name.endswith("_object") or name.endswith("_object_list"):
            continue  # replaced below
        post = _POST.get(name)

        def make(orig=orig, name=name, post=post):
            bind = binder(orig) if post is not None else None

            def counted(*args, **kwargs):
                sim.called(name)
                res = orig(*args, **kwargs)
                if post is not None:
                    try:
                        post(sim, dist, torch, bind(args, kwargs))
                    except Exception as err:
                        sim.problem("post " + name, "torch.distributed.%s: the simulation's rule for its outputs "
                                    "could not be applied (%r); they keep what they held" % (name, err))
                return res

            counted.__wrapped__ = orig
            counted.__name__ = getattr(orig, "__name__", name)
            counted.__doc__ = getattr(orig, "__doc__", None)
            counted._ptscope_counted = True
            return counted

        _replace_everywhere(orig, make(), name)


def _group_rank(dist, group, global_rank):
    try:
        if group is None:
            return global_rank
        return dist.get_group_rank(group, global_rank)
    except Exception:
        return global_rank


# ------------------------------------------------------------ object collectives
def _patch_object_collectives(dist, sim):
    """Object collectives pickle through tensors whose contents the fake
    backend never fills: emulate them for identical ranks, replaying what
    earlier simulated ranks of the bundle sent (Mailbox). Each replacement
    accepts exactly the arguments of the function it replaces in this
    PyTorch (its signature binds them)."""

    def me():
        try:
            return dist.get_rank()
        except Exception:
            return sim.rank

    def replace(name, body):
        orig = getattr(dist, name, None)
        if orig is None:
            return
        bind = binder(orig)
        first = first_param(orig, "object_list")

        def fn(*args, **kwargs):
            sim.called(name)
            a = bind(args, kwargs)
            a.setdefault("object_list", a.get(first))
            return body(a)

        fn.__wrapped__ = orig
        fn.__name__ = name
        fn.__doc__ = orig.__doc__
        _replace_everywhere(orig, fn, name)

    def all_gather_object(a):
        lst, obj = a.get("object_list"), a.get("obj")
        for i in range(len(lst)):
            lst[i] = obj

    def gather_object(a):
        lst, obj = a.get("object_gather_list"), a.get("obj")
        if lst is not None:
            for i in range(len(lst)):
                lst[i] = obj

    def broadcast_object_list(a):
        lst = a.get("object_list")
        src = _global_src(dist, a)
        if src is None or src == me():
            sim.mailbox.put("broadcast", me(), "all", list(lst))
            return
        ok, got = sim.mailbox.get("broadcast", src, "all")
        if ok and len(got) == len(lst):
            lst[:] = got
            return
        sim.problem("broadcast_object_list",
                    "torch.distributed.broadcast_object_list from rank %s: the simulated rank %d receives nothing "
                    "(rank %s was not simulated before it in this bundle) and keeps its own list %r"
                    % (src, sim.rank, src, _short(lst)))

    def scatter_object_list(a):
        out, inp = a.get("scatter_object_output_list"), a.get("scatter_object_input_list")
        if inp:
            idx = min(_group_rank(dist, a.get("group"), me()), len(inp) - 1)
            out[0] = inp[idx]
        else:
            sim.problem("scatter_object_list", "torch.distributed.scatter_object_list: the simulated rank %d receives "
                        "nothing from the source rank and keeps %r" % (sim.rank, _short(out)))

    def send_object_list(a):
        lst = a.get("object_list")
        dst = _global_src(dist, a, "dst")
        sim.last_sent = list(lst)
        sim.mailbox.put("p2p", me(), dst, list(lst))

    def recv_object_list(a):
        lst = a.get("object_list")
        src = _global_src(dist, a)
        ok, got = sim.mailbox.get("p2p", src, me()) if src is not None else (False, None)
        if ok and len(got) == len(lst):
            lst[:] = got
        elif sim.last_sent is not None and len(sim.last_sent) == len(lst):
            lst[:] = sim.last_sent
            sim.problem("recv_object_list last sent",
                        "torch.distributed.recv_object_list from rank %s: rank %s was not simulated before rank %d "
                        "in this bundle; rank %d receives what it sent last itself (every pipeline boundary taken "
                        "alike)" % (src, src, sim.rank, sim.rank))
        elif sim.last_received is not None and len(sim.last_received) == len(lst):
            lst[:] = sim.last_received
        else:
            raise RuntimeError(
                "ptscope --simulate-world-size: rank %d receives with torch.distributed.recv_object_list what rank %s "
                "sends (a pipeline stage's input shapes); one simulated rank cannot compute it. Simulate the ranks "
                "up to this one in order, which keeps what each sends in the bundle for the next: "
                "--simulate-rank all (or 0-%d); or give the stage its shapes (PipelineStage(input_args=..., "
                "output_args=...))" % (sim.rank, src, sim.rank))
        sim.last_received = list(lst)
        return src if src is not None else sim.rank

    for name, body in (("all_gather_object", all_gather_object), ("gather_object", gather_object),
                       ("broadcast_object_list", broadcast_object_list), ("scatter_object_list", scatter_object_list),
                       ("recv_object_list", recv_object_list), ("send_object_list", send_object_list)):
        replace(name, body)


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


def guard_device_mesh(torch):
    """Under --no-gpu every tensor is fake, but a DeviceMesh needs the real
    values of its small mesh tensor (rank coordinates, sub-meshes): build
    meshes outside the fake mode."""
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        import torch.distributed.device_mesh as dm
    except Exception as err:
        log_once("fake mesh", "--no-gpu --simulate-world-size: DeviceMesh cannot be built outside the fake mode (%r)"
                 % (err,))
        return
    orig_init = dm.DeviceMesh.__init__

    def __init__(self, *args, **kwargs):
        with unset_fake_temporarily():
            return orig_init(self, *args, **kwargs)

    dm.DeviceMesh.__init__ = __init__
    orig = getattr(dm, "init_device_mesh", None)
    if orig is not None:
        def init_device_mesh(*args, **kwargs):
            with unset_fake_temporarily():
                return orig(*args, **kwargs)

        init_device_mesh.__wrapped__ = orig
        _replace_everywhere(orig, init_device_mesh, "init_device_mesh")


def guard_fsdp_device(torch):
    """FSDP2 checks that each parameter is on the mesh's device (cuda); under
    --no-gpu fake tensors stand for CUDA memory on the CPU device, so the
    check is made against the parameter's own device. FSDP2 still allocates
    its buffers on cuda, which the tracker counts as GPU memory."""
    cls = None
    for mod in ("torch.distributed.fsdp._fully_shard._fsdp_param", "torch.distributed._composable.fsdp._fsdp_param"):
        try:
            cls = getattr(__import__(mod, fromlist=["FSDPParam"]), "FSDPParam", None)
        except Exception:
            cls = None
        if cls is not None:
            break
    orig = getattr(cls, "_init_sharded_param", None)
    if orig is None:
        return

    def _init_sharded_param(self, param, device, *args, **kwargs):
        try:
            if getattr(device, "type", None) == "cuda" and param.device.type == "cpu":
                device = param.device
        except Exception:
            pass
        return orig(self, param, device, *args, **kwargs)

    _init_sharded_param.__wrapped__ = orig
    cls._init_sharded_param = _init_sharded_param


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

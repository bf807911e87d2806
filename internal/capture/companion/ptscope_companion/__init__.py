"""ptscope capture companion (embedded in the ptscope binary).

Loaded by ptscope's sitecustomize in every Python process started under
`ptscope run`. It imports only the standard library until torch is imported
by the program, and only starts capturing when this process initialises CUDA
(so launchers such as torchrun, data-loader workers and helper scripts stay
untouched). Configuration comes from the environment:

  PTSCOPE_BUNDLE   bundle folder (OUT/<timestamp>_<name>)
  PTSCOPE_CONFIG   JSON options written by `ptscope run`

Everything is guarded: a failure is logged once (stderr and the bundle's
companion.log) and the program continues without that part of the capture.
"""
import json
import os
import sys
import threading
import time

_STATE = {"cfg": None, "bundle": None, "capture": None, "logged": set(), "disabled": False, "sim": None}
_LOCK = threading.Lock()


def _meta_dir(bundle):
    return os.path.join(bundle, ".ptscope")


def env_rank():
    """The rank from the launcher's environment (RANK, else LOCAL_RANK), or None."""
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        v = os.environ.get(key)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def log_once(key, msg):
    """Log msg to stderr and the bundle's companion.log the first time key is seen."""
    with _LOCK:
        if key in _STATE["logged"]:
            return
        _STATE["logged"].add(key)
    r = env_rank()
    prefix = "ptscope[%s]" % ("pid %d" % os.getpid() if r is None else "rank %d" % r)
    line = "%s: %s" % (prefix, msg)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:
        pass
    bundle = _STATE["bundle"]
    if bundle:
        try:
            fd = os.open(os.path.join(bundle, "companion.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (time.strftime("%Y-%m-%dT%H:%M:%S") + " " + line + "\n").encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except Exception:
            pass


def write_atomic(path, data):
    """Write bytes (or str) to path through a temporary file and a rename."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    d = os.path.dirname(path)
    tmp = os.path.join(d, ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_proc(extra):
    """Record that the companion ran in this process (read by the parent for its warnings)."""
    bundle = _STATE["bundle"]
    rec = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": list(sys.argv[:8]) if hasattr(sys, "argv") else [],
        "python": sys.version.split()[0],
        "env_rank": env_rank(),
        "time_us": int(time.time() * 1e6),
    }
    rec.update(extra)
    try:
        d = os.path.join(_meta_dir(bundle), "proc")
        os.makedirs(d, exist_ok=True)
        write_atomic(os.path.join(d, "%d.json" % os.getpid()), json.dumps(rec))
    except Exception as err:
        log_once("proc", "cannot write to the bundle %s: %r" % (bundle, err))


def selected(cfg):
    ranks = cfg.get("ranks")
    if not ranks:
        return True
    r = env_rank()
    return (r if r is not None else 0) in ranks


class _TorchFinder:
    """A meta-path finder that runs a hook right after `import torch` completes."""

    def __init__(self, hook):
        self.hook = hook
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        orig = spec.loader
        hook = self.hook
        finder = self

        class _Loader:
            def create_module(self, s):
                return orig.create_module(s)

            def exec_module(self, module):
                try:
                    orig.exec_module(module)
                finally:
                    # restore the real loader so nothing downstream sees ours
                    try:
                        module.__loader__ = orig
                        module.__spec__.loader = orig
                    except Exception:
                        pass
                    try:
                        sys.meta_path.remove(finder)
                    except ValueError:
                        pass
                hook(module)

            def __getattr__(self, attr):
                return getattr(orig, attr)

        spec.loader = _Loader()
        return spec


def _after_fork_child():
    # Threads do not survive fork; a forked child (data-loader worker) must not
    # act as the training process.
    _STATE["disabled"] = True
    c = _STATE["capture"]
    if c is not None:
        c.disabled = True


def _simulate_cfg():
    return (_STATE["cfg"] or {}).get("simulate") or {}


def _on_torch_imported(torch):
    try:
        ver = getattr(torch, "__version__", "?")
        _write_proc({"torch": str(ver)})
        scfg = _simulate_cfg()
        mode = scfg.get("mode")
        if mode == "simulate-world" or (mode == "fake" and int(scfg.get("world_size") or 1) > 1):
            try:
                from . import _simulate

                _STATE["sim"] = _simulate.install(torch, scfg, _STATE["bundle"])
            except Exception as err:
                log_once("simulate", "cannot set up --simulate-world-size (%r); the program runs unsimulated" % (err,))
        if mode == "fake":
            try:
                from . import _fake

                _STATE["capture"] = _fake.start(torch, _STATE["cfg"], _STATE["bundle"])
                if _STATE["sim"] is not None:
                    from . import _simulate

                    _simulate.guard_device_mesh(torch)
                    _simulate.guard_fsdp_device(torch)
            except Exception as err:
                log_once("fake", "cannot set up --no-gpu (%r); the program runs as it is" % (err,))
            return
        cuda = getattr(torch, "cuda", None)
        lazy_call = getattr(cuda, "_lazy_call", None) if cuda is not None else None
        if lazy_call is None:
            log_once("nolazy", "torch.cuda._lazy_call is missing: capture disabled in this process")
            return
        # Runs inside torch.cuda's lazy initialisation (or at once if CUDA is
        # already initialised): only a process that uses CUDA captures.
        lazy_call(_activate)
    except Exception as err:
        log_once("torchhook", "cannot arm capture after import torch: %r" % (err,))


def _activate():
    if _STATE["disabled"] or _STATE["capture"] is not None:
        return
    try:
        from . import _capture

        c = _capture.Capture(_STATE["cfg"], _STATE["bundle"])
        _STATE["capture"] = c
        c.start()
    except Exception as err:
        log_once("activate", "capture failed to start (training continues without it): %r" % (err,))


def _any_rank_captured():
    try:
        return any(n.startswith("rank") for n in os.listdir(_STATE["bundle"]))
    except OSError:
        return False


def _write_simulation():
    sim = _STATE["sim"]
    c = _STATE["capture"]
    if sim is None or getattr(c, "tracker", None) is not None:
        return  # --no-gpu's capture writes simulation.json itself, these facts included
    try:
        d = getattr(c, "dir", None) if c is not None else None
        if d is None:
            d = os.path.join(_STATE["bundle"], "rank%d" % sim.rank)
            if not os.path.isdir(d):
                return
        sim.write(d)
    except Exception as err:
        log_once("simulation.json", "cannot write simulation.json: %r" % (err,))


def _at_exit():
    """Tell the parent why this process captured nothing (for its one warning)."""
    _write_simulation()
    c = _STATE["capture"]
    if c is not None and not c.materialized:
        _write_proc({"torch": str(getattr(sys.modules.get("torch"), "__version__", "?")), "cuda_initialized": True})
        return
    if c is not None or _STATE["disabled"]:
        return
    try:
        torch = sys.modules.get("torch")
        rec = {"torch": str(getattr(torch, "__version__", "?")) if torch is not None else None}
        if torch is None:
            import importlib.util

            rec["torch_installed"] = importlib.util.find_spec("torch") is not None
        elif not _any_rank_captured():
            # only asked when nothing was captured anywhere (the parent's warning
            # needs it); a launcher or worker of a capturing run skips the CUDA query
            try:
                rec["cuda_available"] = bool(torch.cuda.is_available())
            except Exception:
                rec["cuda_available"] = False
        _write_proc(rec)
    except Exception:
        pass


def boot():
    bundle = os.environ.get("PTSCOPE_BUNDLE")
    if not bundle or _STATE["bundle"]:
        return
    try:
        cfg = json.loads(os.environ.get("PTSCOPE_CONFIG") or "{}")
    except ValueError as err:
        sys.stderr.write("ptscope: bad PTSCOPE_CONFIG (%s); capture disabled\n" % err)
        return
    _STATE["cfg"] = cfg
    _STATE["bundle"] = bundle
    sim = cfg.get("simulate") or {}
    if sim.get("mode") == "simulate-world" or (sim.get("mode") == "fake" and int(sim.get("world_size") or 1) > 1):
        lws = os.environ.get("LOCAL_WORLD_SIZE", "")
        if os.environ.get("TORCHELASTIC_RUN_ID") and lws.isdigit() and int(lws) > 1:
            log_once("simulate torchrun", "--simulate-world-size runs ONE process: this launcher started %s workers, "
                     "all of them simulating rank %s (run the script without torchrun)" % (lws, sim.get("rank", 0)))
        # a launcher (torchrun --nproc-per-node 1) may have set its own values
        os.environ.update({"RANK": str(sim.get("rank", 0)), "WORLD_SIZE": str(sim.get("world_size", 1)),
                           "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    if not selected(cfg):
        _write_proc({"skipped": True})
        return
    _write_proc({})
    try:
        import atexit

        atexit.register(_at_exit)
    except Exception:
        pass
    try:
        os.register_at_fork(after_in_child=_after_fork_child)
    except Exception:
        pass
    if "torch" in sys.modules:
        _on_torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchFinder(_on_torch_imported))

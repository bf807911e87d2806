"""In-process capture: memory history (with stack windows), snapshots,
profiler traces, tensor inventories and live samples; phases and module
attribution come from the PhasesMixin. Imported only once this process has
initialised CUDA through torch. Every hook is guarded (see _guard)."""
import atexit
import json
import os
import pickle
import signal
import sys
import threading
import time
import weakref

import torch

from . import env_rank, log_once, write_atomic, _meta_dir
from ._history import Windows
from ._phases import PhasesMixin
from ._roles import Inventory

_MAX_JSONL_BYTES = 256 << 20  # per phases.jsonl / live.jsonl
# one encoder for every record: json.dumps with separators builds one per call
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _now_us():
    return int(time.time() * 1e6)


def _rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        try:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # peak, not current
        except Exception:
            return None


class _Jsonl:
    """Append-only JSON-lines file with a size cap (a torn last line is possible on a crash)."""

    def __init__(self, path, what):
        self.path = path
        self.what = what
        self.f = open(path, "a", buffering=1 << 16)
        self.size = 0
        self.lock = threading.Lock()

    def write(self, rec):
        line = _ENCODE(rec) + "\n"
        with self.lock:
            if self.f is None:
                return
            if self.size + len(line) > _MAX_JSONL_BYTES:
                log_once("cap-" + self.what, "%s reached %d bytes; no more records are written" % (self.path, _MAX_JSONL_BYTES))
                self.f.close()
                self.f = None
                return
            self.size += len(line)
            self.f.write(line)

    def flush(self):
        with self.lock:
            if self.f is not None:
                self.f.flush()

    def close(self):
        with self.lock:
            if self.f is not None:
                self.f.close()
                self.f = None


class Capture(PhasesMixin):
    def __init__(self, cfg, bundle):
        self.cfg = cfg
        self.bundle = bundle
        self.disabled = False
        self.rank = env_rank()
        if self.rank is None:
            self.rank = 0
        self.dir = None
        self.materialized = False
        self.mat_failed = False
        self.mat_lock = threading.Lock()
        self.pending = []  # live samples taken before the rank folder exists
        self.facts = {}
        self.device = 0
        self.step = 0  # completed steps
        self.opt_seen = False
        self.fwd_since = False
        self.bwd_since = False
        self.open = []  # open phases (_phases._Ph), outermost first
        self.opt_nested = 0
        self.step_root = None  # id of the first root module called in this step
        self.step_begun = False
        self.step_rf = None  # the open ptscope:step#N range
        self.snapshot_steps = set(cfg.get("snapshot_steps") or [])
        # stack windows (_history): history context switched per step
        rs = cfg.get("record_steps") or {}
        # history "windows": the allocator history only inside stack windows,
        # each saved as a snapshot of its own; "run": for the whole run
        self.windows = Windows(rs.get("mode", "auto"), rs.get("ranges") or (), rs.get("warmup", 3),
                               int(cfg.get("max_entries", 100000)),
                               windowed=cfg.get("history", "windows") == "windows",
                               budget=cfg.get("window_budget") or 0)
        self.hist_on = False  # mode "windows": the history is enabled now
        self.seg_first = 0  # mode "windows": the first entry of self.windows.windows the open history covers
        self.seg_start_us = 0  # when the open history was enabled
        self.seg_steps = 0  # steps that began under it
        self.window_snaps = 0
        self.hist_fn = None  # torch.cuda.memory._record_memory_history, once history runs
        self.hist_kw = None
        self.hist_ctx = None
        self.toggle_ok = False
        self.on_stacks = False  # allocations record stacks now
        self.bw_attr = False  # backward module attribution on (stacked steps)
        self.bw_nodes = {}  # id(node) -> node: autograd nodes given a module pre-hook
        self.bw_roots = []  # the last backward roots given the reset pre-hook
        self.label_hooks = {}
        self.owners = []  # naming roots: the model(s) seen in forward
        self.holding = False  # inside one hook's bookkeeping (_raw)
        self.held = None
        self.inv = None  # _roles.Inventory, once the rank folder exists
        self.opt_del = None  # (torch.optim.Optimizer, the finalizer installed on it)
        self.inv_enabled = True
        self.inv_first = False
        self.phases = None
        self.live = None
        self.prof = None
        self.prof_started = False
        self.snapshot_bytes = 0
        self.snapshots = []
        self.traces = []
        self.oom = None
        self.last_oom_step = None  # the step of the latest OOM (self.oom is the first's)
        self.signal_requests = 0
        self.trigger_seen = 0
        self.stop_evt = threading.Event()
        self.finished = False
        self.main_thread = threading.main_thread()
        self.main_ident = self.main_thread.ident
        self.names = weakref.WeakKeyDictionary()  # module -> fqn
        self.stack = []  # modules whose forward runs on the main thread
        self.stack_names = []  # their names (module paths), in step
        self.name_by_id = {}  # id(module) -> (weak reference, path): the hot path's names
        self.global_on = False  # global module hooks installed (_phases: the first and stacked steps)
        self.global_handles = []
        self.roots = {}  # id(root module) -> (weak reference, its instance hook handles)
        self.mod_meta = False  # module hooks set the allocations' module path
        self.hook_calls = 0  # module forward pre-hooks run (module calls off PyTorch's fast path)
        self.global_steps = 0  # completed steps that ran with global module hooks
        # what the companion asked of torch, for process.json's "companion_calls"
        # (the per-step cost of a capture explains itself from these)
        self.calls = {"allocator_stats": 0, "live_samples": 0, "record_function": 0, "history_switches": 0,
                      "memory_fraction": 0, "backward_root_hooks": 0, "phase_records": 0}
        self.bw_dirty = False  # a stacked step labelled backward nodes: the backward thread keeps a path
        self.limit_at = None  # the reserved peak when the memory fraction was last read
        self.limit = 0
        self.inner_seen = False  # a module was called inside a root's forward (precision's autocast check)
        self.input_seen = False  # the model's token ids were seen (model facts' first_input), or given up on
        self.inner_calls = 0  # inner module calls looked at for them
        self.peak_device_used = 0
        self.peak_rss = 0
        self.handles = []
        self.set_metadata = None
        self.features = {}
        # feature-detected helpers for the hot hooks
        # allocator statistics, nested: the accelerator binding builds the
        # same dict as _cuda_memoryStats from the same counters, in less time
        self.stats_fallback = getattr(torch._C, "_cuda_memoryStats", None)
        self.stats_fn = getattr(torch._C, "_accelerator_getDeviceStats", None) or self.stats_fallback
        # whether a torch profiler runs (then ranges are worth opening)
        pe = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
        self.profiler_on = pe or (lambda: True)
        self.graph_task_id = getattr(torch._C, "_current_graph_task_id", None) or (lambda: -1)
        ic = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        if ic is None:  # torch < 2.3
            ic = getattr(sys.modules.get("torch._dynamo"), "is_compiling", None)
        self.is_compiling = ic or (lambda: False)

    @property
    def windowed(self):
        """History mode "windows" (self.windows decides; the legacy API falls back to "run")."""
        return self.windows.windowed

    # ------------------------------------------------------------------ helpers
    def _guard(self, key, fn, *args):
        try:
            return fn(*args)
        except Exception as err:
            log_once(key, "%s failed (%r); that part of the capture is skipped" % (key, err))
            return None

    def _raw(self):
        """(allocated, reserved, max_allocated, max_reserved, history events)
        for self.device, from one allocator stats call (history events: the
        allocator's running count of allocations plus two per free, as the
        trace records free_requested and free_completed). Inside a hold (one
        hook's bookkeeping, where nothing is allocated) the first call's
        answer is reused: a phase's end and the next one's start, a step's end
        and the next step's stack decision cost one call."""
        if self.held is not None:
            return self.held
        self.calls["allocator_stats"] += 1
        raw = self.stats_fn
        if raw is not None:  # nested dict, cheaper than torch.cuda.memory_stats' flattening
            try:
                v = _nested(raw(self.device))
            except Exception:
                if raw is self.stats_fallback or self.stats_fallback is None:
                    raise
                # the accelerator binding refused this device or answered
                # in another shape: _cuda_memoryStats from now on
                self.stats_fn = self.stats_fallback
                v = _nested(self.stats_fn(self.device))
        else:
            s = torch.cuda.memory_stats(self.device)
            v = (s.get("allocated_bytes.all.current", 0), s.get("reserved_bytes.all.current", 0),
                 s.get("allocated_bytes.all.peak", 0), s.get("reserved_bytes.all.peak", 0),
                 int(s.get("allocation.all.allocated", 0)) + 2 * int(s.get("allocation.all.freed", 0)))
        if self.holding:
            self.held = v
        return v

    def _hold(self):
        self.holding, self.held = True, None

    def _release(self):
        self.holding, self.held = False, None

    def _entries(self):
        """(history events, max_allocated, max_reserved)."""
        v = self._raw()
        return v[4], v[2], v[3]

    def _stats(self):
        """(allocated, reserved, max_allocated, max_reserved) in bytes for self.device."""
        return self._raw()[:4]

    def _rank_dir(self):
        base = "rank%d" % self.rank
        path = os.path.join(self.bundle, base)
        try:
            os.mkdir(path)
        except FileExistsError:
            path = os.path.join(self.bundle, "%s_pid%d" % (base, os.getpid()))
            os.makedirs(path, exist_ok=True)
        return path

    # ------------------------------------------------------------------ start
    def start(self):
        """Arm the capture at CUDA initialisation. Files appear only once the
        process allocates GPU memory or runs a training phase (materialize), so
        a launcher that merely asks CUDA for device names leaves no rank folder."""
        cfg = self.cfg
        lr = os.environ.get("LOCAL_RANK")
        n = torch.cuda.device_count()
        if lr is not None and lr.isdigit() and int(lr) < n:
            self.device = int(lr)
        else:
            self.device = torch.cuda.current_device()
        self._collect_facts()
        self._guard("allocator settings", self._allocator_settings)
        if cfg.get("memory", True):
            self._guard("memory history", self._start_history)
        if cfg.get("oom", True):
            self._guard("OOM observer", self._attach_oom)
        if cfg.get("phases", True) or cfg.get("trace") or cfg.get("snapshot_steps") or cfg.get("modules", True):
            self._guard("phase hooks", self._install_hooks)
        self._guard("SIGUSR1 handler", self._install_signal)
        t = threading.Thread(target=self._monitor, name="ptscope-monitor", daemon=True)
        t.start()
        atexit.register(self.finish)

    def materialize(self):
        """Create the rank folder and its files (once). False if that failed."""
        if self.materialized:
            return True
        with self.mat_lock:
            if self.materialized:
                return True
            if self.mat_failed:
                return False
            try:
                self.dir = self._rank_dir()
                if self.cfg.get("phases", True):
                    self.phases = _Jsonl(os.path.join(self.dir, "phases.jsonl"), "phases")
                self.live = _Jsonl(os.path.join(self.dir, "live.jsonl"), "live")
                try:
                    if not self.inv_enabled:
                        raise RuntimeError("not in this mode")
                    self.inv = Inventory(os.path.join(self.dir, "tensors.jsonl"), self.rank, self.device)
                    for o in self.owners:
                        self._inv_add_owner(o)
                    self.features["tensor_inventory"] = True
                except Exception as err:
                    self.inv = None
                    if self.inv_enabled:
                        log_once("tensor inventory", "tensor inventories are off (%r)" % (err,))
                for rec in self.pending:
                    self.live.write(rec)
                self.pending = []
                self.materialized = True
                self._write_facts()
            except Exception as err:
                self.mat_failed = True
                log_once("materialize", "cannot write the rank folder (%r); capture stops" % (err,))
                return False
        return True

    def _device_facts(self):
        facts = {}
        try:
            p = torch.cuda.get_device_properties(self.device)
            facts["device_name"] = p.name
            facts["device_total_memory_bytes"] = int(p.total_memory)
            facts["device_capability"] = "%d.%d" % (p.major, p.minor)
            facts["multi_processor_count"] = int(p.multi_processor_count)
        except Exception as err:
            log_once("props", "device properties unavailable: %r" % (err,))
        return facts

    def _collect_facts(self):
        self.start_us = _now_us()
        rec = {
            "schema_version": 1,
            "rank": self.rank,
            "local_rank": _int_env("LOCAL_RANK"),
            "world_size": _int_env("WORLD_SIZE"),
            "local_world_size": _int_env("LOCAL_WORLD_SIZE"),
            "pid": os.getpid(),
            "argv": list(getattr(sys, "argv", [])),
            "device_index": self.device,
            "torch_version": str(torch.__version__),
            "cuda_version": getattr(torch.version, "cuda", None),
            "hip_version": getattr(torch.version, "hip", None),
            "python_version": sys.version.split()[0],
            "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF"),
            "start_time_us": self.start_us,
            "features": self.features,
        }
        rec.update(self._device_facts())
        self.facts = rec

    def _write_facts(self):
        if self.materialized:
            write_atomic(os.path.join(self.dir, "process.json"), json.dumps(self.facts, indent=1))

    def _write_final(self):
        write_atomic(os.path.join(self.dir, "process.json"), json.dumps(self._record(True), indent=1))

    def _write_progress(self):
        """process.json as of now, written as a window is saved: a process
        killed later (SIGKILL, the kernel's OOM killer, or a launcher's
        SIGTERM after another rank failed) never runs finish, and its saved
        windows would otherwise be snapshots without their steps. It has no
        end_time_us, which marks a process that finished."""
        if self.materialized:
            if self.phases is not None:
                self.phases.flush()  # the steps so far, with the windows (the monitor flushes every interval)
            write_atomic(os.path.join(self.dir, "process.json"), json.dumps(self._record(False), indent=1))

    def _record(self, final):
        """process.json's record: at the end (final), or of the run so far."""
        rec = dict(self.facts)
        rec["features"] = self.features
        now = _now_us()
        if final:
            rec["end_time_us"] = now
        else:
            rec["updated_time_us"] = now
        rec["steps"] = self.step
        try:
            a, r, pa, pr = self._stats()
            rec.update({"allocated_bytes": a, "reserved_bytes": r, "max_allocated_bytes": pa, "max_reserved_bytes": pr})
        except Exception:
            pass
        rec["max_device_used_bytes"] = self.peak_device_used
        rec["max_host_rss_bytes"] = self.peak_rss
        rec["snapshots"] = self.snapshots
        rec["history"] = {"context": self.hist_ctx_default(), "record_steps": self.windows.mode,
                          "switchable": self.toggle_ok, "mode": "windows" if self.windowed else "run"}
        wins = []
        for w in self.windows.windows:  # a window decided for a step that never ran is dropped
            w = dict(w)
            if w["first_step"] >= self.step or not final and not w.get("snapshot"):
                continue  # (so far: only the windows saved)
            w["last_step"] = min(w["last_step"], self.step - 1) if w["first_step"] >= 0 else w["last_step"]
            if w["end_time_us"] is None:
                w["end_time_us"] = now
            wins.append(w)
        rec["stack_windows"] = wins
        rec["module_hooks"] = {"calls": self.hook_calls, "global_steps": self.global_steps,
                               "roots": len(self.roots)}
        calls = dict(self.calls)
        calls["inventories"] = self.inv.count if self.inv is not None else 0
        rec["companion_calls"] = calls
        rec["traces"] = self.traces
        rec["oom"] = self.oom
        return rec

    def _allocator_settings(self):
        # a snapshot taken before any history is recording is small and cheap
        s = torch.cuda.memory._snapshot()
        settings = s.get("allocator_settings") if isinstance(s, dict) else None
        if settings is not None:
            self.facts["allocator_settings"] = settings

    def hist_ctx_default(self):
        """The history context of stacked steps (None: no stacks at all)."""
        if not self.cfg.get("memory", True) or self.cfg.get("stacks", "python") == "none":
            return None
        return "all" if self.cfg.get("free_stacks") else "alloc"

    def _start_history(self):
        import inspect

        cfg = self.cfg
        f = torch.cuda.memory._record_memory_history
        stacks = cfg.get("stacks", "python")
        max_entries = int(cfg.get("max_entries", 100000))
        params = inspect.signature(f).parameters
        if "stacks" in params:
            ctx = self.hist_ctx_default()
            kw = {"enabled": "all", "context": ctx, "stacks": "all" if stacks == "all" else "python",
                  "max_entries": max_entries}
            if "global_record_annotations" in params:
                kw["global_record_annotations"] = True
            if self.windowed:
                # enabled at each window's start and disabled at its end
                f(**kw)
                self.hist_fn, self.hist_kw, self.hist_ctx = f, kw, ctx
                self.hist_on = True
                self.toggle_ok = True
                self.on_stacks = ctx is not None
                self.seg_first, self.seg_start_us, self.seg_steps = 0, _now_us(), 0
                self.windows.start_setup(self.seg_start_us)
                self.features["memory_history"] = True
                self.features["stack_windows"] = True
                return
            # Switching the context keeps the ring only where PyTorch has
            # clear_history (earlier versions clear it on every call).
            if "clear_history" in params:
                kw["clear_history"] = False
                self.toggle_ok = ctx is not None
            f(**kw)
            self.hist_fn, self.hist_kw, self.hist_ctx = f, kw, ctx
            self.on_stacks = ctx is not None
            if self.on_stacks:
                self.windows.start_setup(_now_us())
            if ctx is not None and not self.toggle_ok:
                self.windows.mode = "all"
                log_once("stack windows", "this PyTorch clears its allocator history when stack recording is "
                         "switched, so stacks are recorded for every step (slower; --stacks none records none)")
        else:  # legacy boolean API
            self.windows.windowed = False
            f(True, record_context=stacks != "none", trace_alloc_max_entries=max_entries,
              trace_alloc_record_context=stacks != "none", record_context_cpp=stacks == "all")
            self.on_stacks = stacks != "none"
            self.windows.mode = "all"
        self.features["memory_history"] = True
        self.features["stack_windows"] = self.toggle_ok

    def _decide_stacks(self):
        """At the start of step self.step: switch allocation stacks on or off
        (_history.Windows) and with them backward module attribution."""
        if not self.features.get("memory_history") or (self.hist_ctx_default() is None and not self.windowed):
            self.bw_attr = False
            return
        w = self.windows
        entries, pa, pr = self._entries()
        if pr != self.limit_at:  # the limit matters only as reserved memory grows towards it
            self.limit_at = pr
            self.limit = self._memory_limit()
        w.device_total = self.limit
        now = _now_us()
        on, reason = w.decide(self.step, entries, pa, pr, now)
        if self.windowed:
            self._window_switch(on, reason, entries, now)
            return
        if not self.toggle_ok:
            on, reason = self.on_stacks, w.mode
        w.begin(self.step, on, reason, entries, now)
        if on != self.on_stacks and self.toggle_ok:
            kw = dict(self.hist_kw)
            kw["context"] = self.hist_ctx_default() if on else None
            self.calls["history_switches"] += 1
            self.hist_fn(**kw)
            self.hist_ctx = kw["context"]
        self._set_stacks(on)

    def _set_stacks(self, on):
        """Whether the step about to run records allocation stacks, and with
        them backward module attribution."""
        self.on_stacks = on
        self.bw_attr = on and self.set_metadata is not None and bool(self.features.get("backward_module_metadata"))

    def _window_switch(self, on, reason, entries, now):
        """Mode "windows": enable the history as a window begins; as one ends,
        save it (snapshot_windowK.pickle) and disable the history, which
        empties PyTorch's ring."""
        w = self.windows
        if on and not self.hist_on:
            self.calls["history_switches"] += 1
            self.hist_fn(**self.hist_kw)
            self.hist_on = True
            self.seg_first, self.seg_start_us, self.seg_steps = len(w.windows), now, 0
        elif not on and self.hist_on:
            self._close_window(now)
        w.begin(self.step, on, reason, entries, now)
        if on:
            self.seg_steps += 1
        self._set_stacks(on and self.hist_ctx is not None)

    def _close_window(self, now):
        """Save the open window as a snapshot of its own and disable the history."""
        w = self.windows
        if w.windows and w.windows[-1]["end_time_us"] is None:
            w.windows[-1]["end_time_us"] = now
        setup = any(x["reason"] == "setup" for x in w.windows[self.seg_first:])
        self._name_segment(self.snapshot("window%d" % self.window_snaps))
        self.window_snaps += 1
        if w.windows[self.seg_first:]:
            w.windows[-1]["save_us"] = _now_us() - now  # what saving the window cost
        self.calls["history_switches"] += 1
        try:
            self.hist_fn(enabled=None)
        finally:
            self.hist_on = False
        self._guard("process.json", self._write_progress)  # part of the window's cost
        end = _now_us()
        steps = max(1, self.seg_steps)
        dump = end - now
        w.closed(end - self.seg_start_us, (now - self.seg_start_us) // steps + dump, setup)

    def _name_segment(self, name):
        """The windows the open history covers are saved in snapshot name."""
        for x in self.windows.windows[self.seg_first:]:
            x["snapshot"] = name

    def _memory_limit(self):
        """The bytes this process may reserve: the device's total memory, times
        the allocator's per-process fraction where one is set
        (torch.cuda.set_per_process_memory_fraction: the run runs out of
        memory at that limit, not at the device's), for the capacity window."""
        total = int(self.facts.get("device_total_memory_bytes") or 0)
        get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
        if get is None:
            get = getattr(getattr(torch.cuda, "memory", None), "get_per_process_memory_fraction", None)
        if get is not None and total > 0:
            self.calls["memory_fraction"] += 1
            try:
                f = float(get(self.device))
            except Exception as err:
                log_once("memory fraction", "the per-process memory fraction is unavailable (%r)" % (err,))
                f = 1.0
            if 0 < f < 1:
                limit = int(total * f)
                if self.facts.get("memory_limit_bytes") != limit:
                    self.facts["memory_limit_bytes"] = limit
                    self.facts["memory_fraction"] = f
                return limit
        return total

    def _inventory(self, at, step=None, extra=()):
        if self.inv is None:
            return
        self.inv.take(at, self.step if step is None else step, _now_us(), extra)

    def _attach_oom(self):
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            self.features["oom_observer"] = False
            return
        attach(self._on_oom)
        self.features["oom_observer"] = True

    def _install_signal(self):
        if threading.current_thread() is not self.main_thread:
            return
        prev = signal.getsignal(signal.SIGUSR1)

        def handler(signum, frame):
            self.signal_requests += 1
            if callable(prev):
                prev(signum, frame)

        if prev in (signal.SIG_DFL, None) or callable(prev):
            signal.signal(signal.SIGUSR1, handler)

    # ------------------------------------------------------------------ profiler
    def _start_profiler(self):
        from torch.profiler import ProfilerActivity, profile, schedule

        cfg = self.cfg
        sc = cfg.get("schedule") or {}
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        sched = schedule(wait=int(sc.get("wait", 1)), warmup=int(sc.get("warmup", 2)),
                         active=int(sc.get("active", 3)), repeat=int(sc.get("repeat", 1)),
                         skip_first=int(sc.get("skip_first", 0)))
        import warnings

        # torch 2.10/2.11 warn about "cycles" at every schedule transition, even
        # with repeat=1 (pytorch#180387); it is ptscope's schedule, not the user's.
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prof = profile(activities=acts, schedule=sched, on_trace_ready=self._trace_ready,
                           profile_memory=bool(cfg.get("profile_memory", True)),
                           record_shapes=bool(cfg.get("record_shapes", True)),
                           with_stack=bool(cfg.get("with_stack", False)))
            prof.start()
        self.prof = prof
        self.features["profiler"] = True

    def _trace_ready(self, prof):
        if not self.materialize():
            return
        # stopped before a step completed in the active part of the
        # schedule (a job that ended during the warm-up): the profiler
        # would export a trace with none of the training in it
        if self._before_active(prof):
            return
        try:
            name = "trace_step%d.pt.trace.json.gz" % self.step
            tmp = os.path.join(self.dir, ".tmp%d_%s" % (os.getpid(), name))
            prof.export_chrome_trace(tmp)
            os.replace(tmp, os.path.join(self.dir, name))
            self.traces.append(name)
        except Exception as err:
            log_once("trace export", "trace export failed (%r)" % (err,))

    def _before_active(self, prof):
        """Whether prof stopped before its schedule's first active step; if
        so, say once why the bundle has no trace. torch calls on_trace_ready
        only when the active part ends, so a job that ends in the wait or
        warm-up steps is explained by finish(), not by _trace_ready."""
        sc = self.cfg.get("schedule") or {}
        first = int(sc.get("skip_first", 0)) + int(sc.get("wait", 1)) + int(sc.get("warmup", 2))
        done = getattr(prof, "step_num", first + 1)
        if done > first:
            return False
        log_once("trace before active", "the job ended after %d steps, before the profiler's first active step "
                 "(step %d of --schedule %s): no trace was written; run more steps or shorten the schedule's wait and warmup"
                 % (done, first + 1, ",".join("%s=%s" % kv for kv in sorted(sc.items())) or "wait=1,warmup=2,active=3"))
        return True

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, label, force=False):
        """Dump a snapshot (without --memory it holds the allocator state, no history)."""
        if not self.materialize():
            return None
        try:
            s = torch.cuda.memory._snapshot()
            data = pickle.dumps(s, protocol=4)
            limit = int(self.cfg.get("max_snapshot_bytes", 0) or 0)
            if limit and self.snapshot_bytes + len(data) > limit and not force:
                log_once("snapshot budget", "snapshot %r (%d bytes) would pass --max-snapshot-size (%d bytes, %d used); no more snapshots are written" % (label, len(data), limit, self.snapshot_bytes))
                return None
            name = "snapshot_%s.pickle" % label
            write_atomic(os.path.join(self.dir, name), data)
            self.snapshot_bytes += len(data)
            self.snapshots.append(name)
            return name
        except Exception as err:
            log_once("snapshot " + label.rstrip("0123456789"), "snapshot %s failed (%r)" % (label, err))
            return None

    def _on_oom(self, device, alloc, device_alloc, device_free):
        try:
            if not self.materialize():
                return
            self.last_oom_step = self.step
            if self.oom is not None:
                # a later one (the program caught the first: a batch-size
                # finder, a loop that skips the batch): the record stays the
                # first's, which its snapshot and inventory describe
                self.oom["count"] = self.oom.get("count", 1) + 1
                return
            self.oom = {"device": int(device), "requested_bytes": int(alloc), "device_allocated_bytes": int(device_alloc),
                        "device_free_bytes": int(device_free), "time_us": _now_us(), "step": self.step,
                        "phase": self.phase.name if self.phase else None, "count": 1}
            self._guard("tensor inventory", self._inventory, "oom")
            name = self.snapshot("oom", force=True)
            self.oom["snapshot"] = name
            write_atomic(os.path.join(self.dir, "oom.json"), json.dumps(self.oom))
            where = "snapshot written to " + os.path.join(self.dir, name) if name else "its snapshot could not be written"
            log_once("oom", "CUDA out of memory at step %d (requested %d bytes); %s" % (self.step, alloc, where))
        except Exception as err:
            log_once("oom handler", "OOM snapshot failed (%r)" % (err,))

    # ------------------------------------------------------------------ monitor
    def _sample(self):
        self.calls["live_samples"] += 1
        a, r, pa, pr = self._stats()
        rec = {"time_us": _now_us(), "rank": self.rank, "step": self.step,
               "phase": self.phase.name if self.phase else None,
               "allocated_bytes": a, "reserved_bytes": r, "max_allocated_bytes": pa, "max_reserved_bytes": pr}
        try:
            free, total = torch.cuda.mem_get_info(self.device)
            rec["device_used_bytes"] = int(total - free)
            rec["device_total_bytes"] = int(total)
            self.peak_device_used = max(self.peak_device_used, rec["device_used_bytes"])
        except Exception as err:
            log_once("mem_get_info", "device memory (mem_get_info) unavailable: %r" % (err,))
        rss = _rss_bytes()
        if rss is not None:
            rec["host_rss_bytes"] = rss
            self.peak_rss = max(self.peak_rss, rss)
        if not self.materialized:
            if a == 0 and r == 0:  # nothing allocated yet: keep the sample for later
                self.pending.append(rec)
                del self.pending[:-3600]
                return
            if not self.materialize():
                return
        self.live.write(rec)
        self.live.flush()
        if self.phases is not None:
            self.phases.flush()

    def _check_trigger(self):
        path = os.path.join(_meta_dir(self.bundle), "snapshot_request")
        try:
            with open(path) as f:
                n = int(f.read().strip() or 0)
        except (OSError, ValueError):
            n = 0
        want = n > self.trigger_seen or self.signal_requests > 0
        if want and self.materialized:
            self.trigger_seen = max(n, self.trigger_seen)
            self.signal_requests = 0
            self.snapshot("signal%d_step%d" % (self.trigger_seen, self.step))

    def _monitor(self):
        interval = float(self.cfg.get("interval_s", 1.0) or 1.0)
        try:
            torch.cuda.set_device(self.device)
        except Exception:
            pass
        while not self.stop_evt.is_set():
            if self.disabled:
                return
            self._guard("live sample", self._sample)
            self._guard("snapshot request", self._check_trigger)
            self.stop_evt.wait(interval)

    # ------------------------------------------------------------------ end
    def finish(self):
        if self.finished or self.disabled:
            return
        self.finished = True
        self.stop_evt.set()
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self._guard("optimizer finalizer", self._unhook_optimizer_del)
        self._guard("module hooks", self._drop_module_hooks)
        if not self.materialized:
            try:
                used = self._stats()[2] > 0  # peak allocated
            except Exception:
                used = False
            if not used:  # CUDA initialised, nothing allocated: leave no rank folder
                self.disabled = True
                return
        top = self.phase
        if not (top is not None and top.pending and self.last_oom_step == top.step):
            # a forward that ran out of memory after its root call (in the
            # loss) is closed below as aborted; any other ended with its root
            self._guard("phase end", self._close_pending, True)
        if self.fwd_since and not self.opt_seen and not self.bwd_since and self.phase is None:
            self.step += 1  # the last forward of a forward-only loop completes a step
        while self.open:
            self._guard("phase end", self._close, self.open.pop(), True)
        self._close_step()
        self._guard("tensor inventory", self._inventory, "end")
        if self.prof is not None:
            prof, self.prof = self.prof, None
            self._guard("profiler stop", prof.stop)
            if not self.traces:
                self._guard("profiler schedule", self._before_active, prof)
        if "end" in (self.cfg.get("snapshot_at") or []):
            name = self.snapshot("end")
            if self.hist_on:  # the open window is saved in the end snapshot
                self._name_segment(name)
        elif self.hist_on:
            self._guard("stack window", self._close_window, _now_us())
        if not self.materialize():
            self.disabled = True
            return
        self._guard("live sample", self._sample)
        if self.phases is not None:
            self.phases.close()
        self.live.close()
        self._guard("process.json", self._write_final)
        self.disabled = True


def _nested(s):
    """The _raw tuple from a nested allocator stats dict."""
    a = s["allocated_bytes"]["all"]
    r = s["reserved_bytes"]["all"]
    n = s["allocation"]["all"]
    return (int(a["current"]), int(r["current"]), int(a["peak"]), int(r["peak"]),
            int(n["allocated"]) + 2 * int(n["freed"]))


def _int_env(key):
    v = os.environ.get(key)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None

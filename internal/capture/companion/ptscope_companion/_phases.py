"""Steps, phases and module attribution from global hooks (a mixin of Capture).

A step is an optimizer step: the global optimizer step post-hook ends it
(a wrapping optimizer whose step runs an inner one's, as accelerate's does,
counts once). Without an optimizer, a step ends when the first root module
of the step is called again (an inference loop over model, or over emb, enc
and head in turn).

A forward phase is the outermost module call(s) between other phases: it
begins at the pre-hook of a root module call (no module running on the main
thread, not inside autograd) and, while grad is enabled, stays open after
the call returns, so that several root modules called in turn (Lightning's
training_step calling self.emb, self.enc, self.head) and the loss computed
after them make one forward phase. It ends when the backward, the optimizer
step or a forward of a module already called in it begins. Under no_grad
(evaluation) each root call is its own phase. A forward that runs inside
optimizer.step(closure) suspends the optimizer phase, so forward and
backward are written as phases of their own ("closure": true) and the
optimizer phase covers only the update after the closure's backward.

Module attribution: every allocation made while a module's forward runs
carries its path in user_metadata (_set_memory_metadata, per thread). In
stacked steps, each module call's output autograd nodes also get a pre-hook
that sets the module's path on the thread running the backward, so the
backward's allocations carry the path of the module whose forward created
the node (the innermost module wins when modules share an output node)."""
import json
import sys
import threading
import weakref
from threading import get_ident

import torch

from . import log_once
from ._roles import output_nodes

_MAX_NODES = 200000  # attributed autograd nodes remembered per backward


def _now_us():
    import time

    return int(time.time() * 1e6)


class _Ph:
    """An open phase."""
    __slots__ = ("name", "start", "before", "rf", "step", "closure", "roots", "mods", "pending", "suspended",
                 "resumed", "stacks", "root_end", "use_root_end")

    def __init__(self, name, start, before, rf, step):
        self.name, self.start, self.before, self.rf, self.step = name, start, before, rf, step
        self.closure = False
        self.roots = 1
        self.mods = set()
        self.pending = False  # a forward whose root calls returned; more roots may join it
        self.suspended = False  # an optimizer phase whose closure is running
        self.resumed = False
        self.stacks = False
        self.root_end = None  # (time, stats) when its last root call returned
        self.use_root_end = False  # closed by another forward or the step's end: end there


class PhasesMixin:
    """Hooks and phase bookkeeping; needs Capture's fields and helpers."""

    # ------------------------------------------------------------------ install
    def _install_hooks(self):
        import importlib

        self._set_global_hooks(True)  # discovery: the roots of the first step
        opt = importlib.import_module("torch.optim.optimizer")
        if hasattr(opt, "register_optimizer_step_pre_hook"):
            self.handles.append(opt.register_optimizer_step_pre_hook(self._opt_pre))
            self.handles.append(opt.register_optimizer_step_post_hook(self._opt_post))
            self.features["optimizer_hooks"] = True
        self._guard("optimizer finalizer", self._hook_optimizer_del)
        orig_backward = torch.autograd.backward
        cap = self

        def backward(*args, **kwargs):
            if cap.disabled or cap.finished or threading.current_thread() is not cap.main_thread:
                return orig_backward(*args, **kwargs)
            cap._guard("backward roots", cap._backward_roots, args[0] if args else kwargs.get("tensors"))
            cap._safe_phase_begin("backward")
            try:
                return orig_backward(*args, **kwargs)
            finally:
                cap._safe_phase_end("backward")

        backward.__wrapped__ = orig_backward
        backward.__doc__ = orig_backward.__doc__
        torch.autograd.backward = backward
        if self.cfg.get("modules", True):
            sm = getattr(torch.cuda.memory, "_set_memory_metadata", None)
            self.features["memory_metadata"] = sm is not None
            if sm is not None:
                self.set_metadata = sm
                node = getattr(getattr(torch.autograd, "graph", None), "Node", None)
                self.features["backward_module_metadata"] = node is None or hasattr(node, "register_prehook")
        self.mod_meta = self.global_on and self.set_metadata is not None
        self.features["module_hooks_in_stacked_steps"] = True
        self._guard("DDP hooks", self._wrap_ddp)

    # ------------------------------------------------------------------ hook modes
    # Global module hooks (torch.nn.modules.module.register_module_forward_*)
    # take every module call of the process off _call_impl's fast path; they
    # are on only while they pay: the first step (which finds the root
    # modules) and the stacked steps (module paths, backward attribution).
    # Elsewhere instance hooks on the root modules alone mark the forward
    # phases (steps and the other phases come from the optimizer hooks and
    # the autograd.backward wrapper), and every other module call runs on
    # PyTorch's fast path. A switch made inside a module's pre-hook is safe:
    # _call_impl reads the pre-hooks before running them and the post-hooks
    # after forward, so the call in progress gets exactly one post-hook.
    def _set_global_hooks(self, on):
        if on == self.global_on:
            return
        mm = sys.modules.get("torch.nn.modules.module")
        if mm is None:
            import importlib

            mm = importlib.import_module("torch.nn.modules.module")
        if on:
            try:  # always_call (torch >= 2.1 for global hooks) also runs the hook when forward raises
                h2 = mm.register_module_forward_hook(self._fwd_post, always_call=True)
                self.features["forward_hook_always_call"] = True
            except TypeError:
                h2 = mm.register_module_forward_hook(self._fwd_post)
                self.features["forward_hook_always_call"] = False
            h1 = mm.register_module_forward_pre_hook(self._fwd_pre)
            self.global_handles = [h1, h2]
            self._root_hooks(False)
        else:
            self._root_hooks(True)
            for h in self.global_handles:
                try:
                    h.remove()
                except Exception:
                    pass
            self.global_handles = []
            if self.set_metadata is not None:
                self.set_metadata("")  # no module path where no module hooks run
        self.global_on = on
        self.mod_meta = on and self.set_metadata is not None

    def _root_hooks(self, on):
        """Instance forward hooks on the root modules found so far (on), or none (off)."""
        for k, e in list(self.roots.items()):
            ref, handles = e
            for h in handles:
                try:
                    h.remove()
                except Exception:
                    pass
            m = ref()
            if m is None:
                del self.roots[k]
                continue
            if not on:
                self.roots[k] = (ref, ())
                continue
            try:
                try:
                    h2 = m.register_forward_hook(self._fwd_post, always_call=True)
                except TypeError:
                    h2 = m.register_forward_hook(self._fwd_post)
                h1 = m.register_forward_pre_hook(self._fwd_pre)
                self.roots[k] = (ref, (h1, h2))
            except Exception as err:
                self.roots[k] = (ref, ())
                log_once("root hooks", "cannot hook a root module (%r); its forward phases are missed "
                         "outside stacked steps" % (err,))

    def _add_root(self, module):
        """Remember a root module found by the global hooks (hooked when they go)."""
        k = id(module)
        e = self.roots.get(k)
        if e is not None and e[0]() is module:
            return
        try:
            self.roots[k] = (weakref.ref(module), ())
        except TypeError:
            pass

    def _switch_hooks(self):
        """At a step's start (after its stack decision): the hook mode of the step."""
        self._set_global_hooks(self._want_global())

    def _drop_module_hooks(self):
        for h in self.global_handles:
            try:
                h.remove()
            except Exception:
                pass
        self.global_handles = []
        self.global_on = False
        self.mod_meta = False
        self._root_hooks(False)

    def _want_global(self):
        """Global module hooks for the step about to begin: the first step
        (root discovery), and stacked steps where module metadata is on."""
        if self.step < 1:
            return True
        return self.on_stacks and bool(self.cfg.get("modules", True)) and self.set_metadata is not None

    def _hook_optimizer_del(self):
        """Take an inventory as an optimizer that stepped is finalized, while
        its state is still alive: the companion holds optimizers weakly, and a
        training function that returns frees its optimizer before the exit
        inventory. A finalizer (__del__) on torch.optim.Optimizer runs before
        the object's state is cleared, also for one collected in a reference
        cycle (where weak references are cleared first, hence the ids).
        Optimizer classes that define their own __del__ are left alone."""
        cls = getattr(getattr(torch, "optim", None), "Optimizer", None)
        if cls is None or "__del__" in cls.__dict__:
            return
        cap = self

        def __del__(opt):
            try:
                if cap.disabled or cap.finished or cap.inv is None or not cap.inv.dying(opt):
                    return
                cap._inventory("optimizer_freed", extra=(opt,))
            except Exception as err:
                log_once("optimizer finalizer", "inventory at an optimizer's end failed (%r)" % (err,))

        __del__._ptscope = True
        cls.__del__ = __del__
        self.opt_del = (cls, __del__)
        self.features["optimizer_finalizer"] = True

    def _unhook_optimizer_del(self):
        cls, fn = self.opt_del or (None, None)
        self.opt_del = None
        if cls is not None and cls.__dict__.get("__del__") is fn:
            del cls.__del__

    def _wrap_ddp(self):
        """Label what DistributedDataParallel allocates in its init helper and
        pre-forward (its gradient buckets, rebuilt after the first step) with
        user_metadata "ptscope:ddp" and a region record in tensors.jsonl."""
        mod = sys.modules.get("torch.nn.parallel.distributed")
        cls = getattr(mod, "DistributedDataParallel", None)
        if cls is None:
            return
        cap = self
        for meth in ("_ddp_init_helper", "_pre_forward"):
            orig = cls.__dict__.get(meth)
            if orig is None or getattr(orig, "_ptscope", False):
                continue

            def make(orig, meth):
                def wrapped(*args, **kwargs):
                    if cap.disabled or cap.finished or cap.is_compiling() or threading.get_ident() != cap.main_ident:
                        return orig(*args, **kwargs)
                    try:
                        before, t0 = cap._stats(), _now_us()
                        if cap.set_metadata is not None:
                            cap.set_metadata("ptscope:ddp")
                    except Exception as err:
                        log_once("DDP region", "DDP region failed (%r)" % (err,))
                        return orig(*args, **kwargs)
                    try:
                        return orig(*args, **kwargs)
                    finally:
                        cap._guard("DDP region", cap._ddp_region, meth, before, t0)

                wrapped._ptscope = True
                wrapped.__wrapped__ = orig
                wrapped.__name__ = getattr(orig, "__name__", meth)
                wrapped.__doc__ = getattr(orig, "__doc__", None)
                return wrapped

            setattr(cls, meth, make(orig, meth))
        self.features["ddp_regions"] = True

    def _ddp_region(self, meth, before, t0):
        if self.set_metadata is not None:
            self.set_metadata(self.stack_names[-1] if self.stack_names and self.mod_meta else "")
        after = self._stats()
        if after[0] != before[0] and self.materialize() and self.inv is not None:
            self.inv.region("ddp_buckets" if meth == "_ddp_init_helper" else "ddp_pre_forward", self.step,
                            t0, _now_us(), before[0], after[0])

    # ------------------------------------------------------------------ names
    def _module_name(self, m):
        return self.names.get(m) or type(m).__name__

    def _name(self, m, name):
        self.names[m] = name
        try:
            self.name_by_id[id(m)] = (weakref.ref(m), name)
        except TypeError:
            pass

    def _owner(self, root):
        """The outermost module, in the calling frames' `self`, that contains
        root: Lightning's training_step calls self.emb, self.enc and self.head
        of a LightningModule that is never called itself; naming them by that
        module gives the paths its named_parameters uses."""
        getframe = getattr(sys, "_getframe", None)
        if getframe is None:
            return root
        owner = root
        f = getframe(1)
        for _ in range(16):
            if f is None:
                break
            try:
                s = f.f_locals.get("self")
            except Exception:
                s = None
            if s is not None and s is not root and s is not owner and isinstance(s, torch.nn.Module):
                try:
                    if any(m is owner for m in s.modules()):
                        owner = s
                except Exception:
                    pass
            f = f.f_back
        return owner

    def _learn_names(self, root):
        """Names every module under root's owner, once per new root."""
        if root in self.names:
            return self.owners[-1] if self.owners else root
        owner = self._owner(root)
        try:
            for n, m in owner.named_modules():
                if m not in self.names:
                    self._name(m, n if n else type(owner).__name__)
        except Exception:
            self._name(root, type(root).__name__)
        if owner not in self.owners:
            self.owners.append(owner)
            if self.inv is not None:
                self._inv_add_owner(owner)
        return owner

    def _inv_add_owner(self, owner):
        self.inv.add_root(owner)
        if any("FSDP" in type(m).__name__ for m in owner.modules()):
            self.inv.fsdp = True

    # ------------------------------------------------------------------ forward hooks
    def _fwd_pre(self, module, args):
        # hot path: runs for every module call. Under torch.compile, dynamo
        # folds is_compiling() to True, so tracing these hooks adds no graph break.
        if self.is_compiling() or self.disabled or get_ident() != self.main_ident:
            return None
        try:
            self.hook_calls += 1
            stack = self.stack
            if not stack:
                if self.graph_task_id() == -1:
                    if self.global_on:
                        self._add_root(module)
                    self._root_begin(module)
            elif not self.input_seen:
                if not self.inner_seen:
                    self.inner_seen = True
                    self._guard("precision", self._inner_autocast)
                self._guard("model facts", self._first_input, module, args)
            # the name, from (weak reference, path) by id: a dict lookup and
            # a dereference, where a WeakKeyDictionary makes a weak reference
            # per call
            e = self.name_by_id.get(id(module))
            name = e[1] if e is not None and e[0]() is module else self._module_name(module)
            stack.append(module)
            self.stack_names.append(name)
            if self.mod_meta:
                self.set_metadata(name)
        except Exception as err:
            log_once("forward pre-hook", "forward pre-hook failed (%r)" % (err,))
        return None

    def _fwd_post(self, module, args, output):
        if self.is_compiling() or self.disabled or get_ident() != self.main_ident:
            return None
        try:
            stack = self.stack
            if not stack:
                return None
            names = self.stack_names
            # pop up to and including this module (robust to exceptions in children)
            while stack:
                m = stack.pop()
                names.pop()
                if m is module:
                    break
            if self.bw_attr:
                try:
                    self._attribute(module, output)
                except Exception as err:
                    self.bw_attr = False  # until the next stacked step
                    log_once("backward attribution", "backward module attribution failed (%r)" % (err,))
            if self.mod_meta:
                self.set_metadata(names[-1] if names else "")
            if not stack:
                self._root_end()
        except Exception as err:
            log_once("forward hook", "forward hook failed (%r)" % (err,))
        return None

    def _root_begin(self, module):
        owner = self._learn_names(module)
        if "precision" not in self.facts:
            self.facts["precision"] = None  # once, even if it fails
            self._guard("precision", self._record_precision, owner)
            self._guard("model facts", self._record_model, owner)
        grad = torch.is_grad_enabled()
        top = self.open[-1] if self.open else None
        if top is not None and top.name == "forward" and top.pending:
            if grad and id(module) not in top.mods:
                top.pending = False  # another root of the same forward
                top.roots += 1
                top.mods.add(id(module))
                return
            self._close_pending(at_root_end=True)
        if not self.opt_seen and self.fwd_since and not self.bwd_since and self.step_root == id(module):
            self._step_done()  # forward-only loop: the step's first root again
        if not self.fwd_since:
            self.step_root = id(module)
        self.fwd_since = True
        top = self.open[-1] if self.open else None
        closure = top is not None and top.name == "optimizer"
        if closure:
            self._suspend(top)
        self._safe_phase_begin("forward")
        top = self.open[-1] if self.open else None
        if top is not None and top.name == "forward":
            top.mods.add(id(module))
            top.closure = closure or self._in_closure()
        if not self.inv_first and self.inv is not None:
            self.inv_first = True
            self._guard("tensor inventory", self._inventory, "first_forward")

    def _root_end(self):
        top = self.open[-1] if self.open else None
        if top is None or top.name != "forward" or top.pending:
            return
        if torch.is_grad_enabled():
            top.pending = True  # more roots or the loss may follow; closed by what comes next
            top.root_end = (_now_us(), self._stats())
        else:
            self._phase_end("forward")
        if self.bw_attr and self.inv is not None and self.inv.fsdp:
            self._guard("tensor inventory", self._inventory, "forward_end")

    def _in_closure(self):
        return any(p.name == "optimizer" and p.suspended for p in self.open)

    def _close_pending(self, at_root_end=False):
        """Close a pending forward: where its last root call returned when a
        new forward or the step's end closes it (what ran since is not
        forward work), now when the backward or the optimizer does (the loss
        computed after the model's call is)."""
        top = self.open[-1] if self.open else None
        if top is not None and top.name == "forward" and top.pending:
            top.use_root_end = at_root_end and top.root_end is not None
            self._phase_end("forward")

    def _inner_autocast(self):
        """At the first module called inside a root's forward: accelerate (and
        so the HF Trainer) enters autocast inside the model's wrapped forward,
        after the root's pre-hook saw it off."""
        rec = self.facts.get("precision")
        if not rec or rec.get("autocast_cuda"):
            return
        try:
            on = torch.is_autocast_enabled("cuda")
        except TypeError:  # torch < 2.4 takes no device type
            on = torch.is_autocast_enabled()
        if on:
            rec["autocast_cuda"] = True
            try:
                rec["autocast_dtype"] = str(torch.get_autocast_dtype("cuda")).replace("torch.", "")
            except Exception:
                pass

    def _record_precision(self, root):
        """At the first forward: the model's parameter bytes by dtype, whether
        CUDA autocast is on (here, or at the first module the root calls:
        _inner_autocast), and whether FSDP wraps the model (its mixed
        precision policy computes in low precision without autocast). analyze
        reads them for its fp32-compute finding."""
        by = {}
        for p in root.parameters():
            k = str(p.dtype).replace("torch.", "")
            by[k] = by.get(k, 0) + int(p.numel()) * int(p.element_size())
        try:
            on = torch.is_autocast_enabled("cuda")
        except TypeError:  # torch < 2.4 takes no device type
            on = torch.is_autocast_enabled()
        rec = {"parameter_bytes_by_dtype": by, "autocast_cuda": bool(on),
               "fsdp": any("FSDP" in type(m).__name__ or "FullyShardedDataParallel" in type(m).__name__
                           for m in root.modules())}
        if on:
            try:
                rec["autocast_dtype"] = str(torch.get_autocast_dtype("cuda")).replace("torch.", "")
            except Exception:
                pass
        self.facts["precision"] = rec

    def _record_model(self, root):
        """At the first forward: what `ptscope estimate --from` rebuilds the
        job from. A Hugging Face model's config (through the wrappers that
        keep the model in .module or ._orig_mod: DDP, torch.compile), its
        attention implementation and whether gradient checkpointing is on."""
        m = root
        for _ in range(4):
            if hasattr(getattr(m, "config", None), "to_json_string"):
                break
            inner = getattr(m, "module", None) or getattr(m, "_orig_mod", None)
            if inner is None:
                break
            m = inner
        rec = {"class": type(m).__name__}
        cfg = getattr(m, "config", None)
        if hasattr(cfg, "to_json_string"):
            rec["hf_config"] = json.loads(cfg.to_json_string(use_diff=False))
            impl = getattr(cfg, "_attn_implementation", None)
            if isinstance(impl, str):
                rec["attn_implementation"] = impl
        ckpt = getattr(m, "is_gradient_checkpointing", None)
        if isinstance(ckpt, bool):
            rec["gradient_checkpointing"] = ckpt
        self.facts["model"] = rec

    def _first_input(self, module, args):
        """The first integer tensor a module inside the first forward takes
        (a language model's token ids, given to its embedding): its shape is
        the micro-batch and the sequence. Looks at the first 64 inner calls."""
        self.inner_calls += 1
        if self.inner_calls > 64:
            self.input_seen = True
            return
        a = args[0] if args else None
        dt, shape = getattr(a, "dtype", None), getattr(a, "shape", None)
        if dt is None or not shape or getattr(dt, "is_floating_point", True) or getattr(dt, "is_complex", False):
            return
        self.input_seen = True
        rec = self.facts.get("model")
        if isinstance(rec, dict):
            rec["first_input"] = {"module": self._module_name(module), "shape": [int(n) for n in shape],
                                  "dtype": str(dt).replace("torch.", "")}

    # ------------------------------------------------------------------ backward attribution
    def _label_hook(self, name):
        h = self.label_hooks.get(name)
        if h is None:
            sm = self.set_metadata

            def h(grad_outputs, _name=name):
                try:
                    sm(_name)
                except Exception:
                    pass
                return None

            self.label_hooks[name] = h
        return h

    def _attribute(self, module, output):
        """Give the output nodes of this module call a pre-hook that sets its
        path on the backward's thread (inner modules register first and win)."""
        if self.set_metadata is None or not torch.is_grad_enabled():
            return
        nodes = self.bw_nodes
        for node in output_nodes(output):
            k = id(node)
            if k in nodes or len(nodes) >= _MAX_NODES:
                continue
            nodes[k] = node
            self.bw_dirty = True
            node.register_prehook(self._label_hook(self._module_name(module)))

    def _backward_roots(self, tensors):
        """Reset the backward thread's module path at the start of every
        backward (it keeps the last one set otherwise), unless the root's node
        already names its module."""
        if self.set_metadata is None or not self.features.get("backward_module_metadata"):
            return
        if not self.bw_attr:
            if not self.bw_dirty:
                return  # no label was set on the backward's thread since the last reset
            self.bw_dirty = False
        roots = tensors if isinstance(tensors, (list, tuple)) else [tensors]
        for t in roots:
            fn = getattr(t, "grad_fn", None)
            if fn is None or id(fn) in self.bw_nodes or not hasattr(fn, "register_prehook"):
                continue
            if any(r is fn for r in self.bw_roots):
                continue  # backward(retain_graph=True) again over the same graph: hooked already
            self.bw_roots.append(fn)
            del self.bw_roots[:-8]
            self.calls["backward_root_hooks"] += 1
            fn.register_prehook(self._label_hook(""))

    # ------------------------------------------------------------------ optimizer hooks
    def _opt_pre(self, optimizer, args, kwargs):
        if self.disabled or threading.current_thread() is not self.main_thread:
            return
        self._safe_phase_begin("optimizer")
        if self.inv is not None:
            self._guard("tensor inventory", self.inv.add_optimizer, optimizer)

    def _opt_post(self, optimizer, args, kwargs):
        if self.disabled or threading.current_thread() is not self.main_thread:
            return
        nested = self.opt_nested > 0
        self._hold()
        try:
            self._safe_phase_end("optimizer")
            if nested:
                return
            self.opt_seen = True
            try:
                self._step_done()
            except Exception as err:
                log_once("step", "step bookkeeping failed (%r)" % (err,))
        finally:
            self._release()

    # ------------------------------------------------------------------ phases
    def _safe_phase_begin(self, name):
        self._hold()
        try:
            if name != "forward":
                self._close_pending()
            if name == "backward":
                self.bwd_since = True
            if self.prof is None and not self.prof_started and self.cfg.get("trace"):
                self.prof_started = True
                self._guard("profiler", self._start_profiler)
            self._phase_begin(name)
        except Exception as err:
            log_once("phase " + name, "phase tracking failed (%r)" % (err,))
        finally:
            self._release()

    def _safe_phase_end(self, name):
        try:
            if name == "optimizer":
                self._close_pending()
            self._phase_end(name)
            if name == "backward":
                self.bw_nodes.clear()
                top = self.open[-1] if self.open else None
                if top is not None and top.name == "optimizer" and top.suspended:
                    self._resume(top)
                if self.on_stacks:
                    self._guard("tensor inventory", self._inventory, "backward_end")
        except Exception as err:
            log_once("phase end " + name, "phase tracking failed (%r)" % (err,))

    @property
    def phase(self):
        """The innermost open phase, or None."""
        return self.open[-1] if self.open else None

    def _annotate(self):
        """Whether a ptscope:* range is worth its cost (about 13 us a range
        on a CPU-bound step): it reaches the allocator's trace only while
        the history records (a window, or history mode "run"), and a
        trace only while a profiler runs (ptscope's --trace or the
        program's own)."""
        return self.hist_on or not self.windowed or self.prof is not None or self.profiler_on()

    def _record_function(self, name):
        if self.phases is None or not self._annotate():
            return None
        self.calls["record_function"] += 1
        try:
            rf = torch.autograd.profiler.record_function("ptscope:" + name)
            rf.__enter__()
            return rf
        except Exception as err:
            log_once("record_function", "record_function failed (%r); phases are not annotated" % (err,))
            return None

    def _phase_begin(self, name):
        if not self.materialize():
            return
        self._step_begins()
        if self.step_rf is None:
            self._open_step()
        if name == "optimizer" and any(p.name == name for p in self.open):
            self.opt_nested += 1  # a wrapping optimizer's step calls the inner one's
            return
        if name == "forward" and self.open and self.open[-1].name == "forward":
            self._phase_end("forward", aborted=True)  # its end hook never ran (exception)
        ph = _Ph(name, _now_us(), self._stats(), self._record_function(name), self.step)
        ph.stacks = self.on_stacks
        if name == "backward":
            ph.closure = self._in_closure()
        self.open.append(ph)

    def _suspend(self, ph):
        """An optimizer phase's closure begins: close its annotation; the
        segment before the closure is not written (it allocates nothing)."""
        self._write(ph, False) if ph.resumed else None
        if ph.rf is not None:
            try:
                ph.rf.__exit__(None, None, None)
            except Exception:
                pass
            ph.rf = None
        ph.suspended = True

    def _resume(self, ph):
        """The closure's backward returned: the optimizer's own work follows."""
        ph.suspended = False
        ph.resumed = True
        ph.start, ph.before = _now_us(), self._stats()
        ph.rf = self._record_function("optimizer")
        ph.stacks = self.on_stacks

    def _phase_end(self, name, aborted=False):
        """Close the innermost open phase called name (and, as aborted, any left open inside it)."""
        if name == "optimizer" and self.opt_nested > 0 and not aborted:
            self.opt_nested -= 1
            return
        idx = None
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].name == name:
                idx = i
                break
        if idx is None:
            return
        while len(self.open) > idx + 1:
            ph = self.open.pop()
            self._close(ph, not (ph.name == "forward" and ph.pending))
        ph = self.open.pop()
        if ph.suspended and not aborted:  # a closure without backward: the update follows its forward
            self._resume(ph)
        self._close(ph, aborted)

    def _close(self, ph, aborted):
        if ph.rf is not None:
            try:
                ph.rf.__exit__(None, None, None)
            except Exception:
                pass
            ph.rf = None
        self._write(ph, aborted)

    def _write(self, ph, aborted):
        before = ph.before
        if ph.use_root_end:
            end, after = ph.root_end
        else:
            end, after = _now_us(), self._stats()
        rec = {
            "phase": ph.name, "rank": self.rank, "step": ph.step,
            "start_time_us": ph.start, "end_time_us": end,
            "allocated_before_bytes": before[0], "allocated_after_bytes": after[0],
            "reserved_before_bytes": before[1], "reserved_after_bytes": after[1],
            "max_allocated_before_bytes": before[2], "max_allocated_after_bytes": after[2],
            "max_reserved_before_bytes": before[3], "max_reserved_after_bytes": after[3],
        }
        parent = None
        for p in reversed(self.open):
            if p is not ph and not p.suspended:
                parent = p.name
                break
        if parent is not None:
            rec["parent"] = parent
        if ph.closure:
            rec["closure"] = True
        if ph.name == "forward" and ph.roots > 1:
            rec["roots"] = ph.roots
        if ph.stacks:
            rec["stacks"] = True
        if aborted:
            rec["aborted"] = True
        if self.phases is not None:
            self.calls["phase_records"] += 1
            self.phases.write(rec)

    # ------------------------------------------------------------------ steps
    def _step_begins(self):
        """The first phase of the run: step 0 begins (decides its stacks)."""
        if not self.step_begun:
            self.step_begun = True
            self._guard("stack windows", self._decide_stacks)

    def _open_step(self):
        """A `ptscope:step#N` range from the start of the step's first phase to
        its end: snapshots and traces get the steps' bounds, accumulation and
        closures included (what runs before the first phase, such as loading
        the batch, falls between steps; no range is left for a step that
        never began)."""
        if self.phases is None or self.step_rf is not None or not self._annotate():
            return
        self.calls["record_function"] += 1
        try:
            self.step_rf = torch.autograd.profiler.record_function("ptscope:step#%d" % self.step)
            self.step_rf.__enter__()
        except Exception as err:
            self.step_rf = None
            log_once("record_function", "record_function failed (%r); phases are not annotated" % (err,))

    def _close_step(self):
        rf, self.step_rf = self.step_rf, None
        if rf is not None:
            try:
                rf.__exit__(None, None, None)
            except Exception:
                pass

    def _step_done(self):
        self._close_pending(at_root_end=True)
        self._close_step()
        stacked = self.on_stacks
        self.step += 1
        self.fwd_since = False
        self.bwd_since = False
        self.bw_nodes.clear()
        if self.prof is not None:
            try:
                self.prof.step()
            except Exception as err:
                log_once("profiler step", "profiler step failed (%r); tracing stops" % (err,))
                self.prof = None
        if stacked:
            self._guard("tensor inventory", self._inventory, "step_end", self.step - 1)
        self.step_begun = True
        if self.global_on:
            self.global_steps += 1
        self._guard("stack windows", self._decide_stacks)
        self._guard("module hooks", self._switch_hooks)
        if self.step in self.snapshot_steps:
            self.snapshot("step%d" % self.step)

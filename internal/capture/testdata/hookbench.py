"""The companion's Python cost on its hot paths, over testdata/faketorch, for
BenchmarkCompanionHooks. Usage: hookbench.py COMPANION_DIR

Times, in this process and at best of 5 repetitions:
  module_call_us  the global forward pre- and post-hook around one module
                  call inside a forward (every module call of every step):
                  the name lookup, the module-path metadata, the stack
  step_us         the phase and step bookkeeping of one training step
                  (forward, backward and optimizer phases, the step's end and
                  the next step's stack decision): records, allocator stats,
                  record_function ranges, a phases.jsonl line each
  *_per_step      what one such step asks of torch (Capture.calls): allocator
                  stats calls, record_function ranges, phase records,
                  backward root pre-hooks, memory-fraction queries
  call_global_us, call_roots_us, call_off_us
                  one module call of a 100-module forward through
                  faketorch's Module.__call__ (its stand-in for _call_impl's
                  fast and slow paths), hooks and the root's phase included:
                  with the global hooks of a stacked step, with the root's
                  instance hooks only (every other step), without ptscope
PyTorch's own cost of calling hooks (its _call_impl slow path) and of
allocator stats are not in it: faketorch stands in for both. Prints one JSON
line."""
import json
import sys
import tempfile
import time

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

torch.cuda._lazy_init()
from ptscope_companion import _capture  # noqa: E402


class M(torch.nn.Module):
    def forward(self, x):
        return x


def best(f, n):
    out = 1e18
    for _ in range(5):
        t0 = time.perf_counter()
        f(n)
        out = min(out, (time.perf_counter() - t0) / n * 1e6)
    return out


cap = _capture.Capture({"memory": False, "phases": True, "modules": True}, tempfile.mkdtemp())
cap.start_us = 0
cap.set_metadata = torch.cuda.memory._set_memory_metadata
cap.features["backward_module_metadata"] = True
cap.materialize()
root, leaf = M(), M()
root.leaf = leaf
opt = torch.optim.Optimizer(root.parameters())


def calls(n):
    cap._fwd_pre(root, ())  # a root: the forward phase begins
    for _ in range(n):
        cap._fwd_pre(leaf, ())
        cap._fwd_post(leaf, (), None)
    cap._fwd_post(root, (), None)


def steps(n):
    for _ in range(n):
        cap._fwd_pre(root, ())
        cap._fwd_post(root, (), None)
        cap._safe_phase_begin("backward")
        cap._safe_phase_end("backward")
        cap._opt_pre(opt, (), {})
        cap._opt_post(opt, (), {})


class Wide(torch.nn.Module):
    """A root whose forward calls its 100 children (a step's module calls)."""

    def __init__(self):
        super().__init__()
        for i in range(100):
            setattr(self, "m%d" % i, M())

    def forward(self, x):
        for m in self._children.values():
            m(x)
        return x


wide = Wide()


def model_calls(n):
    for _ in range(n // 100):
        wide(None)


def per_call(mode):
    """us per module call through faketorch's Module.__call__, all included:
    "off" no hooks (the fast path), "global" the global hooks of a stacked
    step, "roots" the root's instance hooks of any other step."""
    cap._set_global_hooks(mode == "global")
    if mode == "off":
        cap._drop_module_hooks()
    model_calls(1000)
    return best(model_calls, 100000)


cap._set_global_hooks(True)
cap.opt_seen = True  # the root calls below are not a forward-only loop's steps
wide(None)  # found as a root
calls(10)
steps(10)
out = {"module_call_us": best(calls, 100000), "step_us": best(steps, 2000)}
before = dict(cap.calls)
steps(100)
for k in ("allocator_stats", "record_function", "phase_records", "backward_root_hooks", "memory_fraction"):
    out[k + "_per_step"] = (cap.calls[k] - before[k]) / 100.0
cap.step = 1
for mode in ("global", "roots", "off"):
    out["call_%s_us" % mode] = per_call(mode)
print(json.dumps(out))

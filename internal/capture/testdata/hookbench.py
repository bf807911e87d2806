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


calls(10)
steps(10)
print(json.dumps({"module_call_us": best(calls, 100000), "step_us": best(steps, 2000)}))

"""Facts measured inside a training process, for ptscope's trainer bundles.

Every trainer under scripts/gpu/trainers/ ends with write_facts(): the
numbers the process itself reads from torch (peaks, optimizer steps, bytes of
parameters, gradients and optimizer state, world size), written as JSON to
$FACTS_OUT, else into the ptscope bundle ($PTSCOPE_BUNDLE/facts.json, rank R>0:
facts_rankR.json), else ./facts.json. Bytes count each device storage once
(tied weights, views), DTensors by their local shard: what the rank holds."""
import json
import os
import sys

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def transformer_lm():
    """examples/transformer_lm.py as a module (its TransformerLM, SIZES, VOCAB)."""
    path = os.path.join(REPO, "examples")
    if path not in sys.path:
        sys.path.insert(0, path)
    import transformer_lm

    return transformer_lm


def capped_lm(cap, seq, vocab):
    """examples/transformer_lm.py's model (d_model 768, 6 layers) on the GPU
    under a cap of cap bytes (torch.cuda.set_per_process_memory_fraction),
    seeded: the OOM trainers' set-up."""
    lm = transformer_lm()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
    torch.manual_seed(0)
    return lm.TransformerLM(768, 3072, 6, 12, max_positions=seq, vocab=vocab).cuda().train()


def lm_step(model, opt, batch, seq, vocab, before_zero_grad=None):
    """One training step on random tokens: bf16 autocast forward, fp32
    cross-entropy, backward, optimizer step, before_zero_grad() when given
    (the gradients are still there), zero_grad."""
    import torch.nn.functional as F

    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab).float(), x.view(-1))
    loss.backward()
    opt.step()
    if before_zero_grad is not None:
        before_zero_grad()
    opt.zero_grad(set_to_none=True)


def local(t):
    return getattr(t, "_local_tensor", t)


def storage_bytes(tensors):
    seen, n = set(), 0
    for t in tensors:
        if t is None:
            continue
        t = local(t)
        if not t.is_cuda:
            continue
        st = t.untyped_storage()
        if st.data_ptr() == 0 or st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        n += st.nbytes()
    return n


def param_bytes(model):
    return storage_bytes(model.parameters())


def grad_bytes(model):
    return storage_bytes(p.grad for p in model.parameters())


def opt_state_bytes(opt):
    opt = getattr(opt, "optimizer", opt)  # accelerate's and Lightning's wrappers
    return storage_bytes(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v))


class StepCounter:
    """Counts optimizer.step() calls of real optimizers (a global post-hook)."""

    def __init__(self):
        self.n = 0
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.h = register_optimizer_step_post_hook(self._hook)

    def _hook(self, opt, args, kwargs):
        self.n += 1


def write_facts(name, **kw):
    rank = int(os.environ.get("RANK", "0") or 0)
    rec = {
        "trainer": name,
        "torch_version": torch.__version__,
        "device_name": torch.cuda.get_device_name(),
        "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
        "rank": rank,
        "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
        "memory_allocated_end_bytes": torch.cuda.memory_allocated(),
    }
    rec.update(kw)
    path = os.environ.get("FACTS_OUT")
    if not path:
        bundle = os.environ.get("PTSCOPE_BUNDLE")
        base = "facts.json" if rank == 0 else "facts_rank%d.json" % rank
        path = os.path.join(bundle, base) if bundle else base
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    print("facts: " + json.dumps(rec), flush=True)
    return rec

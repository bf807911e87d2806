#!/usr/bin/env python3
"""Measures the setups `ptscope estimate` models beyond one plain GPU, for validating it
(docs/estimate.md): PyTorch-native tensor parallelism on a Hugging Face Llama (TinyLlama-1.1B
shape, random init, bf16 autocast, batch 4 x 2048) with the plan people write with
parallelize_module (hf: q/k/v/gate/up colwise, o/down rowwise, embeddings and lm_head replicated)
and a Megatron-style one (also the embeddings and lm_head split over the vocabulary, loss_parallel);
DistributedDataParallel with and without gradient_as_bucket_view; FSDP2 with CPUOffloadPolicy
(GPU and host memory); torch.compile per decoder layer.

Distributed rows run alone under `ptscope run --simulate-world-size N` (one GPU, fake process
group); scripts/gpu/estimate_tp.sh runs them all. One JSON object per line goes to --out, in the
layout of internal/estimate/testdata/hf_ladder.jsonl:
  {"kind": "row", "row", "family", "setup": {...}, "hf_config": {...}, "measured": {
     "max_memory_allocated", "max_memory_reserved", "phase_peak_allocated": {...},
     "allocated_at_step_start", "parameter_bytes", "gradient_bytes", "optimizer_state_bytes",
     "logits_bytes", "host": {...} (offload rows)}}
Each row prints PASS or FAIL.
"""
import argparse
import contextlib
import gc
import json
import os
import sys
import time
import traceback

import torch

TINYLLAMA = dict(model_type="llama", vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                 num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                 max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
                 hidden_act="silu", rope_theta=10000.0)
LLAMA16 = dict(TINYLLAMA, num_hidden_layers=16)  # the ladder's Llama (scripts/gpu/hf_ladder.py)
FAMILIES = {"tinyllama": TINYLLAMA, "llama": LLAMA16}


def row(name, family, precision="amp_bf16", mb=4, seq=2048, **kw):
    r = dict(row=name, family=family, precision=precision, mode="train", attn="sdpa", grad_ckpt=False,
             micro_batch=mb, seq=seq, optimizer="adamw")
    r.update(kw)
    return r


ROWS = [
    row("tinyllama_tp2_hf", "tinyllama", dist="tp_hf", world=2),
    row("tinyllama_tp4_hf", "tinyllama", dist="tp_hf", world=4),
    row("tinyllama_tp2_megatron", "tinyllama", dist="tp_megatron", world=2),
    row("tinyllama_tp4_megatron", "tinyllama", dist="tp_megatron", world=4),
    row("llama_ddp1", "llama", seq=1024, dist="ddp", world=1),
    row("llama_fsdp2_ws8_offload", "llama", precision="fsdp_mp_bf16", seq=1024, dist="fsdp2_offload", world=8),
    row("llama_compile_amp", "llama", seq=1024, compile=True),
    row("llama_ddp1_bucket_view", "llama", seq=1024, dist="ddp_bucket_view", world=1),
    row("tinyllama_amp", "tinyllama"),
]


def build(r):
    from transformers import AutoConfig, AutoModelForCausalLM
    fields = dict(FAMILIES[r["family"]])
    mt = fields.pop("model_type")
    cfg = AutoConfig.for_model(mt, **fields)
    cfg.use_cache = False
    dtype = torch.bfloat16 if r["precision"] == "bf16" else torch.float32
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=r["attn"])
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, attn_implementation=r["attn"])
    model.to(dtype)
    return cfg, model


def storage_bytes(tensors):
    seen, n = set(), 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        if not t.is_cuda:
            continue
        st = t.untyped_storage()
        if st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        n += st.nbytes()
    return n


def host_bytes(tensors):
    n = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        if not t.is_cuda:
            n += t.untyped_storage().nbytes()
    return n


def vm_hwm():
    """Peak resident set size of this process in bytes (Linux)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def optimizer_tensors(opt):
    for st in opt.state.values():
        for v in st.values():
            if torch.is_tensor(v):
                yield v


def distribute(r, model):
    """Wraps the model as r["dist"] says; returns the model to call and the loss context."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    if not dist.is_initialized():
        # world-1 rows (DDP) run as a plain process with a real NCCL group: DDP's buckets do not
        # depend on the world size, and its comm hook does not run under the fake backend
        for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29517"), ("RANK", "0"), ("WORLD_SIZE", "1")):
            os.environ.setdefault(k, v)
        dist.init_process_group(backend="nccl")
    ws = dist.get_world_size()
    r["world_size_seen"] = ws
    d = r["dist"]
    if d in ("ddp", "ddp_bucket_view"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[torch.cuda.current_device()], gradient_as_bucket_view=d == "ddp_bucket_view"), None
    mesh = init_device_mesh("cuda", (ws,))
    layers = model.model.layers
    if d == "fsdp2_offload":
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        off = CPUOffloadPolicy()
        for layer in layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp, offload_policy=off)
        fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=off)
        return model, None
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, loss_parallel, parallelize_module
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel()}
    for layer in layers:
        parallelize_module(layer, mesh, plan)
    if d == "tp_megatron":
        # vocab-parallel embedding and output projection; logits stay sharded over the
        # vocabulary and the loss is computed on the shards (loss_parallel)
        parallelize_module(model.model.embed_tokens, mesh, RowwiseParallel(input_layouts=Replicate()))
        parallelize_module(model.lm_head, mesh, ColwiseParallel(output_layouts=Shard(-1), use_local_output=False))
        return model, loss_parallel
    return model, None


def measure(r):
    cfg, model = build(r)
    host0 = vm_hwm()
    run, loss_ctx = model, None
    if r.get("dist"):
        run, loss_ctx = distribute(r, model)
    if r.get("compile"):
        for layer in model.model.layers:
            layer.compile()
    x = torch.randint(0, cfg.vocab_size, (r["micro_batch"], r["seq"]), device="cuda")
    amp = r["precision"] == "amp_bf16"
    m = {}
    params = list(model.parameters())
    m["parameter_bytes"] = storage_bytes(params)
    m["parameters"] = sum(p.numel() for p in params)
    model.train()
    # foreach kernels refuse lists mixing DTensor (sharded layers) and plain tensors (norms,
    # replicated embeddings): tensor-parallel rows step param by param
    foreach = False if r.get("dist", "").startswith("tp") else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
    m["optimizer_impl"] = "for-loop" if foreach is False else "foreach"
    vocab_parallel = loss_ctx is not None

    def forward():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            if not vocab_parallel:
                return run(input_ids=x, labels=x)
            out = run(input_ids=x)
            # torchtitan's loss on vocab-sharded logits, inside loss_parallel
            out.loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1).float(), x.flatten(0, 1))
            return out

    ctx = loss_ctx if loss_ctx is not None else contextlib.nullcontext
    with ctx():
        out = forward()
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out
        torch.cuda.synchronize()
        m["allocated_at_step_start"] = torch.cuda.memory_allocated()
        m["optimizer_state_bytes"] = storage_bytes(optimizer_tensors(opt))
        ph = {}
        torch.cuda.reset_peak_memory_stats()
        out = forward()
        torch.cuda.synchronize()
        ph["forward"] = torch.cuda.max_memory_allocated()
        m["allocated_after_forward"] = torch.cuda.memory_allocated()
        m["logits_bytes"] = storage_bytes([out.logits])
        torch.cuda.reset_peak_memory_stats()
        loss = out.loss
        del out
        loss.backward()
        torch.cuda.synchronize()
        ph["backward"] = torch.cuda.max_memory_allocated()
        m["allocated_after_backward"] = torch.cuda.memory_allocated()
        m["gradient_bytes"] = storage_bytes(p.grad for p in model.parameters())
        host_grads = host_bytes(p.grad for p in model.parameters())
        torch.cuda.reset_peak_memory_stats()
        opt.step()
        torch.cuda.synchronize()
        ph["optimizer"] = torch.cuda.max_memory_allocated()
        opt.zero_grad(set_to_none=True)
        del loss
        m["phase_peak_allocated"] = ph
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        out = forward()
        out.loss.backward()
        del out
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    m["step_s"] = round(time.time() - t0, 4)
    m["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    m["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    if r.get("dist") == "fsdp2_offload":
        m["host"] = {"parameter_bytes": host_bytes(model.parameters()),
                     "gradient_bytes": host_grads,
                     "optimizer_state_bytes": host_bytes(optimizer_tensors(opt)),
                     "vm_hwm_before_sharding": host0, "vm_hwm_end": vm_hwm()}
        stats = getattr(torch.cuda.memory, "host_memory_stats", None)
        if stats is not None:
            try:
                m["host"]["pinned"] = {k: v for k, v in stats().items() if "bytes" in k}
            except Exception as e:  # older builds: no pinned-memory statistics
                m["host"]["pinned_error"] = str(e)[:200]
    del opt
    return cfg, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True, help="NAME[,NAME...] | all")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "estimate_setups.jsonl"))
    ap.add_argument("--env", action="store_true", help="write the env record first")
    a = ap.parse_args()
    rows = ROWS if a.rows == "all" else [r for r in ROWS if r["row"] in a.rows.split(",")]
    if not rows:
        sys.exit("unknown rows: %s (have %s)" % (a.rows, ", ".join(r["row"] for r in ROWS)))
    import transformers
    f = open(a.out, "a")
    if a.env:
        f.write(json.dumps({"kind": "env", "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                            "transformers_version": transformers.__version__, "gpu": torch.cuda.get_device_name(),
                            "device_total": torch.cuda.mem_get_info()[1], "command": " ".join(sys.argv)}) + "\n")
    failed = 0
    for r in rows:
        rec = {"kind": "row", "row": r["row"], "family": r["family"], "setup": dict(r)}
        t0 = time.time()
        try:
            cfg, m = measure(rec["setup"])
            rec["hf_config"] = cfg.to_dict()
            rec["measured"] = m
        except Exception as e:  # keep going: one broken row must not lose the others
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
            traceback.print_exc()
            failed += 1
        rec["elapsed_s"] = round(time.time() - t0, 2)
        rec["world_size_env"] = int(os.environ.get("WORLD_SIZE", "1"))
        f.write(json.dumps(rec) + "\n")
        f.flush()
        m = rec.get("measured") or {}
        print("%s: %s max_memory_allocated=%s (%.1f s)" % ("FAIL" if "error" in rec else "PASS", r["row"],
              m.get("max_memory_allocated", rec.get("error", "")), rec["elapsed_s"]), flush=True)
        gc.collect()
        torch.cuda.empty_cache()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

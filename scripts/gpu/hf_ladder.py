#!/usr/bin/env python3
"""Measures the real peak memory of Hugging Face models trained or run as people do, for validating
`ptscope estimate` (docs/estimate.md). Models are randomly initialised from configs written here
(no download): Llama with GQA, Qwen2 (tied embeddings, 152k vocabulary), Mistral, Mixtral (MoE),
GPT-2 large; bf16 autocast (AMP), pure bf16 and fp32; sdpa and eager attention; with and without
HF gradient checkpointing; training (AdamW, PyTorch's default foreach implementation) and
inference; FSDP2 and tensor-parallel ranks (run under `ptscope run --simulate-world-size N`).

One JSON object per line goes to --out (default $OUT/hf_ladder.jsonl):
  {"kind": "env", ...}                                    torch, GPU, transformers
  {"kind": "row", "row": NAME, "family", "hf_config": {...config.json...}, "setup": {...},
   "measured": {"max_memory_allocated", "max_memory_reserved",            whole steady-state step
                "phase_peak_allocated": {"forward", "backward", "optimizer"},
                "allocated_at_step_start", "parameter_bytes", "gradient_bytes",
                "optimizer_state_bytes", "logits_bytes", ...}}
Training rows: one warm-up step (creates AdamW state), one step measured phase by phase
(reset_peak_memory_stats before forward, backward and optimizer), one step measured whole.
Inference rows: one warm-up forward, one measured forward under torch.no_grad() whose output
(logits, and the KV cache when use_cache) is held until the peak is read, as a caller would.

Usage (one GPU):
  python3 scripts/gpu/hf_ladder.py --rows all --out $OUT/hf_ladder.jsonl
  ptscope run --simulate-world-size 8 -- python3 scripts/gpu/hf_ladder.py --rows llama_fsdp2_ws8 --out F
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

import torch

B, S = "micro_batch", "seq"

# Model configs (HF config.json fields); sizes chosen so every row fits an 80 GB H100 quickly.
LLAMA = dict(model_type="llama", vocab_size=32000, hidden_size=2048, intermediate_size=5632,
             num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=4,
             max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
             hidden_act="silu", rope_theta=10000.0)
QWEN2 = dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
             num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
             max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=True,
             hidden_act="silu", rope_theta=1000000.0)
MISTRAL = dict(model_type="mistral", vocab_size=32000, hidden_size=2048, intermediate_size=7168,
               num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               max_position_embeddings=32768, rms_norm_eps=1e-5, tie_word_embeddings=False,
               hidden_act="silu", sliding_window=4096, rope_theta=10000.0)
MIXTRAL = dict(model_type="mixtral", vocab_size=32000, hidden_size=1024, intermediate_size=3584,
               num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=8,
               max_position_embeddings=32768, rms_norm_eps=1e-5, tie_word_embeddings=False,
               hidden_act="silu", num_local_experts=8, num_experts_per_tok=2, rope_theta=1000000.0)
GPT2L = dict(model_type="gpt2", vocab_size=50257, n_embd=1280, n_layer=36, n_head=20, n_positions=1024,
             activation_function="gelu_new", tie_word_embeddings=True)
FAMILIES = {"llama": LLAMA, "qwen2": QWEN2, "mistral": MISTRAL, "mixtral": MIXTRAL, "gpt2": GPT2L}


def row(name, family, precision, mode="train", attn="sdpa", ckpt=False, mb=4, seq=1024, **kw):
    r = dict(row=name, family=family, precision=precision, mode=mode, attn=attn, grad_ckpt=ckpt,
             micro_batch=mb, seq=seq, optimizer="adamw" if mode == "train" else None)
    r.update(kw)
    return r


# precision: amp_bf16 (fp32 weights, torch.autocast bf16), bf16 (weights and optimizer in bf16), fp32
ROWS = [
    row("llama_amp", "llama", "amp_bf16"),
    row("llama_amp_ckpt", "llama", "amp_bf16", ckpt=True),
    row("llama_amp_eager", "llama", "amp_bf16", attn="eager"),
    row("llama_amp_s4096_ckpt", "llama", "amp_bf16", ckpt=True, mb=1, seq=4096),
    row("llama_fp32", "llama", "fp32", mb=2),
    row("llama_bf16", "llama", "bf16"),
    row("llama_infer_amp", "llama", "amp_bf16", mode="infer", mb=8),
    row("llama_infer_bf16", "llama", "bf16", mode="infer", mb=8),
    row("qwen2_amp", "qwen2", "amp_bf16"),
    row("qwen2_bf16", "qwen2", "bf16"),
    row("qwen2_amp_ckpt", "qwen2", "amp_bf16", ckpt=True, mb=8),
    row("mistral_bf16", "mistral", "bf16"),
    row("mistral_bf16_ckpt", "mistral", "bf16", ckpt=True),
    row("mistral_amp", "mistral", "amp_bf16"),
    row("mixtral_amp", "mixtral", "amp_bf16"),
    row("mixtral_bf16", "mixtral", "bf16"),
    row("gpt2l_fp32_eager", "gpt2", "fp32", attn="eager", mb=2),
    row("gpt2l_amp", "gpt2", "amp_bf16"),
    row("gpt2l_infer_fp32_eager", "gpt2", "fp32", mode="infer", attn="eager", mb=8),
    # distributed ranks: run each alone under ptscope run --simulate-world-size N (dist=... rows)
    row("llama_fsdp2_ws8", "llama", "fsdp_mp_bf16", dist="fsdp2", world=8),
    row("llama_fsdp2_ws8_ckpt", "llama", "fsdp_mp_bf16", dist="fsdp2", world=8, ckpt=True),
    row("llama_tp2_hf", "llama", "amp_bf16", dist="tp_hf", world=2, seq=2048),
    row("llama_tp4_hf", "llama", "amp_bf16", dist="tp_hf", world=4, seq=2048),
]


def build(r):
    from transformers import AutoConfig, AutoModelForCausalLM
    fields = dict(FAMILIES[r["family"]])
    mt = fields.pop("model_type")
    cfg = AutoConfig.for_model(mt, **fields)
    cfg.use_cache = r["mode"] == "infer"
    dtype = torch.bfloat16 if r["precision"] == "bf16" else torch.float32
    kwargs = dict(attn_implementation=r["attn"])
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, **kwargs)
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, **kwargs)
    model.to(dtype)
    return cfg, model


def storage_bytes(tensors):
    seen, n = set(), 0
    for t in tensors:
        if t is None or not t.is_cuda:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        st = t.untyped_storage()
        if st.data_ptr() in seen:
            continue
        seen.add(st.data_ptr())
        n += st.nbytes()
    return n


def optimizer_tensors(opt):
    for st in opt.state.values():
        for v in st.values():
            if torch.is_tensor(v):
                yield v


def distribute(r, model):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")
    ws = dist.get_world_size()
    mesh = init_device_mesh("cuda", (ws,))
    layers = model.model.layers
    if r["dist"] == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
    elif r["dist"] == "tp_hf":
        # the plan people write with parallelize_module for HF Llama: q/k/v/gate/up colwise,
        # o/down rowwise; embeddings and lm_head replicated, full logits on every rank
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel()}
        for layer in layers:
            parallelize_module(layer, mesh, plan)
    return ws


def measure(r):
    cfg, model = build(r)
    if r.get("dist"):
        r["world_size_seen"] = distribute(r, model)
    if r["grad_ckpt"]:
        model.gradient_checkpointing_enable()
    vocab = cfg.vocab_size
    x = torch.randint(0, vocab, (r["micro_batch"], r["seq"]), device="cuda")
    amp = r["precision"] == "amp_bf16"
    m = {}
    params = list(model.parameters())
    m["parameter_bytes"] = storage_bytes(params)
    m["parameters"] = sum(p.numel() for p in params)
    if r["mode"] == "infer":
        model.eval()

        def fwd():
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                return model(input_ids=x)

        out = fwd()
        del out
        torch.cuda.synchronize()
        m["allocated_at_step_start"] = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fwd()
        torch.cuda.synchronize()
        m["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        m["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        m["logits_bytes"] = storage_bytes([out.logits])
        pkv = getattr(out, "past_key_values", None)
        kv = []
        if pkv is not None:
            for name in ("key_cache", "value_cache"):
                kv += list(getattr(pkv, name, []) or [])
            for layer in getattr(pkv, "layers", []) or []:
                kv += [getattr(layer, "keys", None), getattr(layer, "values", None)]
        m["kv_cache_bytes"] = storage_bytes(kv)
        m["allocated_after"] = torch.cuda.memory_allocated()
        del out
        return cfg, m
    model.train()
    # foreach kernels refuse lists mixing DTensor (sharded layers) and plain tensors (the
    # replicated embeddings and lm_head of the hf TP plan): those rows step param by param
    foreach = False if r.get("dist", "").startswith("tp") else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
    m["optimizer_impl"] = "for-loop" if foreach is False else "foreach"

    def forward():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            return model(input_ids=x, labels=x)

    # warm-up: AdamW state exists afterwards
    out = forward()
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del out
    torch.cuda.synchronize()
    # phase by phase
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
    torch.cuda.reset_peak_memory_stats()
    opt.step()
    torch.cuda.synchronize()
    ph["optimizer"] = torch.cuda.max_memory_allocated()
    opt.zero_grad(set_to_none=True)
    del loss
    m["phase_peak_allocated"] = ph
    # whole step
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
    del opt
    return cfg, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="single", help="all | single (every row without dist) | NAME[,NAME...]")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "hf_ladder.jsonl"))
    ap.add_argument("--env", action="store_true", help="write the env record first")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for r in ROWS:
            print(r["row"], r.get("dist", ""), r.get("world", ""))
        return
    if a.rows == "all":
        rows = ROWS
    elif a.rows == "single":
        rows = [r for r in ROWS if not r.get("dist")]
    else:
        want = a.rows.split(",")
        rows = [r for r in ROWS if r["row"] in want]
        if len(rows) != len(want):
            sys.exit("unknown rows: %s" % (set(want) - {r["row"] for r in rows}))
    import transformers
    f = open(a.out, "a")

    def emit(rec):
        f.write(json.dumps(rec) + "\n")
        f.flush()
        print(json.dumps(rec)[:400], flush=True)

    if a.env:
        emit({"kind": "env", "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
              "transformers_version": transformers.__version__, "gpu": torch.cuda.get_device_name(),
              "device_total": torch.cuda.mem_get_info()[1], "command": " ".join(sys.argv)})
    for r in rows:
        rec = {"kind": "row", "row": r["row"], "family": r["family"], "setup": dict(r)}
        t0 = time.time()
        try:
            cfg, m = measure(dict(r))
            rec["hf_config"] = cfg.to_dict()
            rec["measured"] = m
        except torch.cuda.OutOfMemoryError as e:
            rec["oom"] = True
            rec["error"] = str(e)[:300]
        except Exception as e:  # keep going: one broken row must not lose the others
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
            traceback.print_exc()
        rec["elapsed_s"] = round(time.time() - t0, 2)
        rec["world_size_env"] = int(os.environ.get("WORLD_SIZE", "1"))
        emit(rec)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()

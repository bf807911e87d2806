#!/usr/bin/env python3
"""Real runs behind `ptscope estimate --from` and the estimate's held-out set (docs/estimate.md).

Three kinds of rows, one JSON object per line to --out (the layout of
internal/estimate/testdata/hf_ladder.jsonl: "row", "family", "setup", "hf_config", "measured"):

  loop rows    a training loop as people write it (`out = model(input_ids=x, labels=x);
               out.loss.backward(); opt.step(); opt.zero_grad(); del out`, autocast around the
               forward), STEPS steps; measured: the process's max_memory_allocated. Captured
               under `ptscope run` (one row per process: the bundle `estimate --from` reads) and
               re-run plainly with a flag changed (the truth of each what-if). OOM rows are
               recorded with "oom": true.
  held-out     scripts/gpu/hf_ladder.py's protocol (warm-up step, a step phase by phase, a
               whole step holding the output through backward) on models and setups outside
               the ladder; never used to tune the estimate.
  dist rows    the same protocol on real GPUs under torchrun (FSDP2, tensor parallelism,
               FSDP2 x TP); every rank writes its line (--out gets ".rankN").

On a device with more memory than an H100 80GB, loop rows cap the process at an H100's
memory (torch.cuda.set_per_process_memory_fraction), so that the OOM row runs out as it
would there.

  python3 scripts/gpu/whatif_runs.py --rows wi_bf16_mb8 --out F          # one loop row
  python3 scripts/gpu/whatif_runs.py --rows rerun --out F                # every re-run
  torchrun --nproc-per-node 2 scripts/gpu/whatif_runs.py --rows m_fsdp2_ws2 --out F
  python3 scripts/gpu/whatif_runs.py --configs DIR                       # config.json per family (no torch)
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

H100_BYTES = 85017493504

# Llama 3.2 1B's shape: tied 128k vocabulary, GQA 32/8, SwiGLU 8192
L32 = dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
           num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
           max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=True,
           hidden_act="silu", rope_theta=500000.0)
# tuning rows beside the loop rows: per-head q/k norms (Qwen3), fused qkv and gate_up (Phi-3)
QWEN3 = dict(model_type="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
             num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
             max_position_embeddings=40960, rms_norm_eps=1e-6, tie_word_embeddings=True,
             hidden_act="silu", rope_theta=1000000.0)
PHI3 = dict(model_type="phi3", vocab_size=32064, hidden_size=2048, intermediate_size=5632,
            num_hidden_layers=12, num_attention_heads=32, num_key_value_heads=32,
            max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
            hidden_act="silu", rope_theta=10000.0)
# held-out families
QWEN25 = dict(model_type="qwen2", vocab_size=151936, hidden_size=1536, intermediate_size=8960,
              num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
              max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=True,
              hidden_act="silu", rope_theta=1000000.0)
SMOL = dict(model_type="llama", vocab_size=49152, hidden_size=960, intermediate_size=2560,
            num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5,
            max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=True,
            hidden_act="silu", rope_theta=100000.0)
MISTRALW = dict(model_type="mistral", vocab_size=32768, hidden_size=3072, intermediate_size=8192,
                num_hidden_layers=10, num_attention_heads=24, num_key_value_heads=8,
                max_position_embeddings=32768, rms_norm_eps=1e-5, tie_word_embeddings=False,
                hidden_act="silu", sliding_window=None, rope_theta=1000000.0)
LLAMAMHA = dict(model_type="llama", vocab_size=64000, hidden_size=2048, intermediate_size=5504,
                num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=16,
                max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False,
                hidden_act="silu", rope_theta=10000.0)
GPT2M = dict(model_type="gpt2", vocab_size=50257, n_embd=1024, n_layer=24, n_head=16, n_positions=1024,
             activation_function="gelu_new", tie_word_embeddings=True)
MIXTRALS = dict(model_type="mixtral", vocab_size=32000, hidden_size=1536, intermediate_size=4096,
                num_hidden_layers=6, num_attention_heads=12, num_key_value_heads=4,
                max_position_embeddings=32768, rms_norm_eps=1e-5, tie_word_embeddings=False,
                hidden_act="silu", num_local_experts=4, num_experts_per_tok=2, rope_theta=1000000.0)
WIDE = dict(model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
            num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
            max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=False,
            hidden_act="silu", rope_theta=500000.0)
LONG = dict(model_type="llama", vocab_size=32000, hidden_size=1024, intermediate_size=4096,
            num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=2,
            max_position_embeddings=16384, rms_norm_eps=1e-5, tie_word_embeddings=False,
            hidden_act="silu", rope_theta=10000.0)
# Qwen3-1.7B's shape (held out for the per-head q/k norms)
QWEN3B = dict(QWEN3, hidden_size=2048, intermediate_size=6144)
FAMILIES = {"qwen3b": QWEN3B, "l32": L32, "qwen3": QWEN3, "phi3": PHI3, "qwen25": QWEN25, "smol": SMOL, "mistralw": MISTRALW,
            "llamamha": LLAMAMHA, "gpt2m": GPT2M, "mixtrals": MIXTRALS, "wide": WIDE, "long": LONG}


def row(name, family, precision, kind, mode="train", attn="sdpa", ckpt=False, mb=4, seq=1024, **kw):
    r = dict(row=name, family=family, precision=precision, mode=mode, attn=attn, grad_ckpt=ckpt,
             micro_batch=mb, seq=seq, optimizer="adamw" if mode == "train" else None, kind=kind)
    r.update(kw)
    return r


def loop(name, precision, mb, seq=256, ckpt=False, steps=4, **kw):
    return row(name, "l32", precision, "loop", ckpt=ckpt, mb=mb, seq=seq, steps=steps, keep="step", **kw)


ROWS = [
    # captured under ptscope run (bundles), 6 steps
    loop("wi_bf16_mb8", "amp_bf16", 8, steps=6),
    loop("wi_fp32_mb8", "fp32", 8, steps=6),
    loop("wi_oom_s512_mb48", "amp_bf16", 48, seq=512, steps=6),
    # re-runs: the what-ifs' truth
    loop("re_bf16_mb4", "amp_bf16", 4),
    loop("re_bf16_mb8", "amp_bf16", 8),
    loop("re_bf16_mb16", "amp_bf16", 16),
    loop("re_bf16_mb32", "amp_bf16", 32),
    loop("re_fp32_mb4", "fp32", 4),
    loop("re_fp32_mb8", "fp32", 8),
    loop("re_fp32_mb16", "fp32", 16),
    loop("re_bf16_mb8_ckpt", "amp_bf16", 8, ckpt=True),
    loop("re_fp32_mb8_ckpt", "fp32", 8, ckpt=True),
    loop("re_bf16true_mb8", "bf16", 8),
    loop("re_bf16_mb8_s512", "amp_bf16", 8, seq=512),
    loop("re_bf16_mb16_ckpt", "amp_bf16", 16, ckpt=True),
    # what the OOM run's proposals would re-run (sequence 512)
    loop("re_oom_mb16", "amp_bf16", 16, seq=512),
    loop("re_oom_mb24", "amp_bf16", 24, seq=512),
    loop("re_oom_mb32", "amp_bf16", 32, seq=512),
    loop("re_oom_mb48_ckpt", "amp_bf16", 48, seq=512, ckpt=True),
    loop("re_oom_mb32_ckpt", "amp_bf16", 32, seq=512, ckpt=True),
    loop("re_oom_bf16true_mb48", "bf16", 48, seq=512),
    loop("re_oom_bf16true_mb24", "bf16", 24, seq=512),
    dict(loop("re_oom_mb24_es", "amp_bf16", 24, seq=512), alloc_conf="expandable_segments:True"),
    # tuning rows (ladder protocol), captured under ptscope run for their allocator history
    row("t_qwen3_amp", "qwen3", "amp_bf16", "ladder"),
    row("t_phi3_amp", "phi3", "amp_bf16", "ladder"),
    # captured for a what-if to tensor parallelism alone: --tp 2 against m_mistralw_tp2_hf
    row("t_mistralw_amp", "mistralw", "amp_bf16", "ladder"),
    # held out: never used to tune the estimate
    row("h_qwen25_amp_s2048", "qwen25", "amp_bf16", "ladder", mb=2, seq=2048),
    row("h_qwen25_amp_ckpt", "qwen25", "amp_bf16", "ladder", ckpt=True, mb=8),
    row("h_smol_fp32", "smol", "fp32", "ladder"),
    row("h_mistralw_bf16", "mistralw", "bf16", "ladder", seq=2048),
    row("h_llamamha_amp_eager", "llamamha", "amp_bf16", "ladder", attn="eager", mb=2),
    row("h_gpt2m_amp", "gpt2m", "amp_bf16", "ladder", mb=8),
    row("h_mixtrals_bf16", "mixtrals", "bf16", "ladder", seq=2048),
    row("h_l32_infer_amp", "l32", "amp_bf16", "ladder", mode="infer", mb=8, seq=2048),
    row("h_wide_amp_ckpt_s4096", "wide", "amp_bf16", "ladder", ckpt=True, mb=1, seq=4096),
    row("h_long_amp_s8192", "long", "amp_bf16", "ladder", mb=1, seq=8192),
    # second batch: grad accumulation (the OOM run's proposal), fused AdamW, the HF Trainer,
    # Qwen3's per-head q/k norms on shapes the fix never saw
    loop("re_oom_mb24_acc2", "amp_bf16", 24, seq=512, accum=2),
    loop("re_oom_mb16_acc3", "amp_bf16", 16, seq=512, accum=3),
    loop("re_bf16_mb8_fused", "amp_bf16", 8, fused=True),
    row("tr_l32_amp", "l32", "amp_bf16", "trainer"),
    row("tr_l32_amp_ckpt", "l32", "amp_bf16", "trainer", ckpt=True),
    row("tr_qwen2_amp", "qwen2", "amp_bf16", "trainer"),
    row("tr_mistral_bf16", "mistral", "bf16", "trainer"),
    row("tr_gpt2l_fp32_eager", "gpt2", "fp32", "trainer", attn="eager", mb=2),
    row("h_qwen3b_amp", "qwen3b", "amp_bf16", "ladder", mb=2),
    row("h_qwen3_bf16", "qwen3", "bf16", "ladder", mb=8),
    row("h_qwen3_fp32", "qwen3", "fp32", "ladder", mb=2),
    # held out, real GPUs under torchrun
    row("m_qwen25_fsdp2_ws2", "qwen25", "fsdp_mp_bf16", "dist", dist="fsdp2", world=2),
    # the truth of a layout what-if: `estimate --from` a captured m_qwen25_fsdp2_ws2 with --dp 4
    row("m_qwen25_fsdp2_ws4", "qwen25", "fsdp_mp_bf16", "dist", dist="fsdp2", world=4),
    # the truth of a tensor-parallel what-if: the same with --tp 2 (dp 2 x tp 2, scripts/gpu/whatif_tp.sh)
    row("m_qwen25_fsdp2_tp2_ws4", "qwen25", "fsdp_mp_bf16", "dist", dist="fsdp2_tp", world=4, tp=2),
    row("m_mistralw_tp2_hf", "mistralw", "amp_bf16", "dist", dist="tp_hf", world=2),
    row("m_l32_fsdp2_ws4_ckpt", "l32", "fsdp_mp_bf16", "dist", dist="fsdp2", world=4, ckpt=True, mb=8),
    row("m_mistralw_fsdp2_tp2_ws4", "mistralw", "amp_bf16", "dist", dist="fsdp2_tp", world=4, tp=2),
]
GROUPS = {
    "rerun": [r["row"] for r in ROWS if r["row"].startswith("re_") and not r.get("alloc_conf") and not r.get("accum")
              and not r.get("fused")],
    "heldout_a": ["h_qwen25_amp_s2048", "h_qwen25_amp_ckpt", "h_smol_fp32", "h_mistralw_bf16", "h_llamamha_amp_eager"],
    "batch2_loop": ["re_oom_mb24_acc2", "re_oom_mb16_acc3", "re_bf16_mb8_fused"],
    "batch2_trainer": ["tr_l32_amp", "tr_l32_amp_ckpt", "tr_qwen2_amp", "tr_mistral_bf16", "tr_gpt2l_fp32_eager"],
    "batch2_qwen3": ["h_qwen3b_amp", "h_qwen3_bf16", "h_qwen3_fp32"],
    "heldout_b": ["h_gpt2m_amp", "h_mixtrals_bf16", "h_l32_infer_amp", "h_wide_amp_ckpt_s4096", "h_long_amp_s8192"],
}


def cap_memory(torch):
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if total > H100_BYTES * 1.05:
        torch.cuda.set_per_process_memory_fraction(H100_BYTES / total)
        return H100_BYTES
    return total


def run_loop(r):
    """The loop people write; the process's peak is the truth."""
    import torch
    import hf_ladder
    limit = cap_memory(torch)
    cfg, model = hf_ladder.build(r)
    if r["grad_ckpt"]:
        model.gradient_checkpointing_enable()
    model.train()
    x = torch.randint(0, cfg.vocab_size, (r["micro_batch"], r["seq"]), device="cuda")
    amp = r["precision"] == "amp_bf16"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if r.get("fused") else None)
    accum = r.get("accum", 1)
    m = {"memory_limit_bytes": limit, "parameter_bytes": hf_ladder.storage_bytes(model.parameters()),
         "parameters": sum(p.numel() for p in model.parameters())}
    t0 = time.time()
    for step in range(r["steps"]):
        for micro in range(accum):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                out = model(input_ids=x, labels=x)
            (out.loss / accum).backward()
            if micro < accum - 1:
                del out
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out
        if step == 0:
            torch.cuda.synchronize()
            m["max_memory_allocated_step0"] = torch.cuda.max_memory_allocated()
    torch.cuda.synchronize()
    m["steps_s"] = round(time.time() - t0, 3)
    m["optimizer_state_bytes"] = hf_ladder.storage_bytes(hf_ladder.optimizer_tensors(opt))
    m["allocated_at_end"] = torch.cuda.memory_allocated()
    m["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    m["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    del opt, model
    return cfg, m


def run_trainer(r):
    """The Hugging Face Trainer with its defaults (its optimizer, its loss
    inside compute_loss, the output dropped), a fixed-length synthetic set."""
    import torch
    import hf_ladder
    from transformers import Trainer, TrainingArguments
    cfg, model = hf_ladder.build(r)
    n, seq, vocab = 64, r["seq"], cfg.vocab_size

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            ids = torch.randint(0, vocab, (seq,))
            return {"input_ids": ids, "labels": ids.clone()}

    args = TrainingArguments(output_dir="/tmp/whatif_trainer_" + r["row"], per_device_train_batch_size=r["micro_batch"],
                             max_steps=4, learning_rate=1e-4, bf16=r["precision"] == "amp_bf16",
                             gradient_checkpointing=r["grad_ckpt"], logging_strategy="no", save_strategy="no",
                             report_to=[], dataloader_num_workers=0, disable_tqdm=True)
    tr = Trainer(model=model, args=args, train_dataset=Data())
    m = {"parameter_bytes": hf_ladder.storage_bytes(model.parameters()),
         "parameters": sum(p.numel() for p in model.parameters()), "optim": str(args.optim)}
    t0 = time.time()
    tr.train()
    torch.cuda.synchronize()
    m["steps_s"] = round(time.time() - t0, 3)
    if tr.optimizer is not None:
        m["optimizer_state_bytes"] = hf_ladder.storage_bytes(hf_ladder.optimizer_tensors(tr.optimizer))
        m["optimizer_class"] = type(getattr(tr.optimizer, "optimizer", tr.optimizer)).__name__
        dflt = getattr(getattr(tr.optimizer, "optimizer", tr.optimizer), "defaults", {})
        m["optimizer_defaults"] = {k: str(v) for k, v in dflt.items() if k in ("foreach", "fused", "lr")}
    m["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    m["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    del tr, model
    return cfg, m


def distribute_2d(r, model):
    """FSDP2 over dp x tensor parallelism (the hf plan) over tp, as torchtitan composes them."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")
    ws, tp = dist.get_world_size(), r["tp"]
    mesh = init_device_mesh("cuda", (ws // tp, tp), mesh_dim_names=("dp", "tp"))
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel()}
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        parallelize_module(layer, mesh["tp"], plan)
        fully_shard(layer, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    return ws


def run_row(r):
    import torch
    import hf_ladder
    hf_ladder.FAMILIES.update(FAMILIES)
    if "LOCAL_RANK" in os.environ:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if r["kind"] == "loop":
        return run_loop(r)
    if r["kind"] == "trainer":
        return run_trainer(r)
    if r.get("dist") == "fsdp2_tp":
        # hf_ladder.measure wraps through its distribute(); this layout is wrapped here
        orig = hf_ladder.distribute
        hf_ladder.distribute = distribute_2d
        try:
            rr = dict(r, dist="tp_2d")  # measure() steps AdamW param by param for "tp*" layouts
            cfg, m = hf_ladder.measure(rr)
        finally:
            hf_ladder.distribute = orig
        return cfg, m
    return hf_ladder.measure(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", help="NAME[,NAME...] or a group: " + ", ".join(GROUPS))
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "whatif.jsonl"))
    ap.add_argument("--raise-oom", action="store_true", help="let an OOM end the process (captured OOM rows)")
    ap.add_argument("--configs", help="write DIR/<family>.json (the config dicts, use_cache false) and exit")
    a = ap.parse_args()
    if a.configs:
        os.makedirs(a.configs, exist_ok=True)
        for k, v in FAMILIES.items():
            with open(os.path.join(a.configs, k + ".json"), "w") as f:
                json.dump(dict(v, use_cache=False), f)
        return
    want = []
    for n in a.rows.split(","):
        want += GROUPS.get(n, [n])
    rows = [r for r in ROWS if r["row"] in want]
    if len(rows) != len(want):
        sys.exit("unknown rows: %s" % (set(want) - {r["row"] for r in ROWS}))
    confs = {r.get("alloc_conf") for r in rows}
    if len(confs) > 1:
        sys.exit("rows with different allocator settings need processes of their own")
    if None not in confs:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = confs.pop()  # before CUDA starts
    import torch
    import transformers
    out = a.out
    rank = int(os.environ.get("RANK", "0"))
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        out += ".rank%d" % rank
    f = open(out, "a")
    failed = 0
    for r in rows:
        rec = {"kind": "row", "row": r["row"], "family": r["family"], "setup": dict(r),
               "env": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "gpu": torch.cuda.get_device_name(), "rank": rank}}
        t0 = time.time()
        try:
            cfg, m = run_row(dict(r))
            rec["hf_config"] = cfg.to_dict()
            rec["measured"] = m
        except torch.cuda.OutOfMemoryError as e:
            if a.raise_oom:
                raise  # as the user's script would: the capture's OOM record is the point
            rec["oom"] = True
            rec["error"] = str(e)[:400]
        except Exception as e:  # keep going: one broken row must not lose the others
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:400])
            traceback.print_exc()
            failed += 1
        rec["elapsed_s"] = round(time.time() - t0, 2)
        f.write(json.dumps(rec, default=str) + "\n")
        f.flush()
        m = rec.get("measured") or {}
        print("%s: %s rank %d max_memory_allocated=%s (%.1f s)" % (
            "OOM" if rec.get("oom") else "FAIL" if "error" in rec else "PASS", r["row"], rank,
            m.get("max_memory_allocated", rec.get("error", "")[:120]), rec["elapsed_s"]), flush=True)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""FSDP2 (fully_shard per block and on the root) around
examples/transformer_lm.py's model (d_model 768, 6 layers), bf16 parameters
through MixedPrecisionPolicy, AdamW, 6 steps of 4 x 512 tokens. Run under
torchrun (NCCL, world size 1 on one GPU) or as one process under
`ptscope run --simulate-world-size 2` (ptscope turns init_process_group into
PyTorch's fake backend). Facts (_common.py) count each rank's local shards."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, BATCH, SEQ, VOCAB = 6, 4, 512, 8000


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
    lm = transformer_lm()
    counter = StepCounter()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = lm.TransformerLM(768, 3072, 6, 12, max_positions=SEQ, vocab=VOCAB)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gbytes = 0
    for _ in range(STEPS):
        x = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB).float(), x.view(-1))
        loss.backward()
        opt.step()
        gbytes = grad_bytes(model)
        opt.zero_grad(set_to_none=True)
    write_facts("fsdp2", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS,
                parameter_bytes=param_bytes(model), gradient_bytes=gbytes, optimizer_state_bytes=opt_state_bytes(opt),
                backend=dist.get_backend(), world_size=dist.get_world_size(), rank=dist.get_rank(),
                config="TransformerLM d768 x6, vocab 8000, FSDP2 per block + root, bf16 params (MixedPrecisionPolicy), AdamW")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

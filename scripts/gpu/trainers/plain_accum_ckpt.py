#!/usr/bin/env python3
"""A plain loop with gradient accumulation (2 micro-batches a step) and
activation checkpointing per block (torch.utils.checkpoint,
use_reentrant=False) around examples/transformer_lm.py's model (d_model 768,
6 layers), bf16 autocast, AdamW, 6 optimizer steps. Facts: _common.py."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, ACCUM, BATCH, SEQ, VOCAB = 6, 2, 4, 512, 8000


def main():
    lm = transformer_lm()
    counter = StepCounter()
    torch.manual_seed(0)
    model = lm.TransformerLM(768, 3072, 6, 12, max_positions=SEQ, vocab=VOCAB, checkpoint=True).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gbytes = 0
    for _ in range(STEPS):
        for _ in range(ACCUM):
            x = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, VOCAB).float(), x.view(-1)) / ACCUM
            loss.backward()
        opt.step()
        gbytes = grad_bytes(model)
        opt.zero_grad(set_to_none=True)
    write_facts("plain_accum_ckpt", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS * ACCUM,
                parameter_bytes=param_bytes(model), gradient_bytes=gbytes, optimizer_state_bytes=opt_state_bytes(opt),
                config="TransformerLM d768 x6, vocab 8000, activation checkpointing per block, accumulation 2, bf16 autocast, AdamW")


if __name__ == "__main__":
    main()

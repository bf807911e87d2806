#!/usr/bin/env python3
"""A leak: a plain loop over examples/transformer_lm.py's model (d_model
512, 4 layers, bf16 autocast, AdamW, batch 8 x 256) that keeps every step's
logits (detached, 32 MiB in bf16) in a list, for 24 steps: the peak rises
every step, so the default capture records stacks in the steps after a rise
(the doubling gap). Facts (_common.py) add the bytes kept per step."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, BATCH, SEQ, VOCAB = 24, 8, 256, 8000


def main():
    lm = transformer_lm()
    counter = StepCounter()
    torch.manual_seed(0)
    model = lm.TransformerLM(512, 2048, 4, 8, max_positions=SEQ, vocab=VOCAB).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kept = []
    for _ in range(STEPS):
        x = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, VOCAB).float(), x.view(-1))
        kept.append(logits.detach())  # the leak
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    per = kept[0].untyped_storage().nbytes()
    write_facts("leak", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS,
                leaked_bytes_per_step=per, leaked_bytes=per * len(kept), parameter_bytes=param_bytes(model),
                optimizer_state_bytes=opt_state_bytes(opt),
                config="TransformerLM d512 x4, vocab 8000, bf16 autocast, AdamW, batch 8x256, logits kept every step")


if __name__ == "__main__":
    main()

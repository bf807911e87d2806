#!/usr/bin/env python3
"""A plain loop with accelerate: Accelerator(mixed_precision="bf16",
gradient_accumulation_steps=2) around examples/transformer_lm.py's model
(d_model 512, 4 layers), AdamW, 6 optimizer steps (12 micro-batches); the
AcceleratedOptimizer's step is called every micro-batch and steps the real
optimizer every second one. Facts: _common.py."""
import os
import sys

import torch
import torch.nn.functional as F
from accelerate import Accelerator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, ACCUM, BATCH, SEQ = 6, 2, 4, 256


def main():
    lm = transformer_lm()
    counter = StepCounter()
    acc = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=ACCUM)
    torch.manual_seed(0)
    model = lm.TransformerLM(512, 2048, 4, 8, max_positions=SEQ, vocab=8000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [torch.randint(0, 8000, (BATCH, SEQ)) for _ in range(STEPS * ACCUM)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    model, opt, loader = acc.prepare(model, opt, loader)
    gbytes = 0
    for x in loader:
        with acc.accumulate(model):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), x.view(-1))
            acc.backward(loss)
            opt.step()
            if acc.sync_gradients:
                gbytes = grad_bytes(model)
            opt.zero_grad()
    write_facts("accelerate_loop", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS * ACCUM,
                parameter_bytes=param_bytes(model), gradient_bytes=gbytes, optimizer_state_bytes=opt_state_bytes(opt),
                config="TransformerLM d512 x4, vocab 8000, bf16 (accelerate), batch 4x256, accumulation 2, AdamW")


if __name__ == "__main__":
    main()

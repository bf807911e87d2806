#!/usr/bin/env python3
"""A torch.compile'd model: examples/transformer_lm.py's model (d_model 512,
4 layers) compiled with torch.compile (default mode), bf16 autocast, AdamW,
8 steps. The module hooks ptscope installs must not break the graph. Facts:
_common.py."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, lm_step, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, BATCH, SEQ, VOCAB = 8, 8, 256, 8000


def main():
    lm = transformer_lm()
    counter = StepCounter()
    torch.manual_seed(0)
    model = lm.TransformerLM(512, 2048, 4, 8, max_positions=SEQ, vocab=VOCAB).cuda().train()
    cmodel = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gbytes = [0]
    for _ in range(STEPS):
        lm_step(cmodel, opt, BATCH, SEQ, VOCAB, before_zero_grad=lambda: gbytes.__setitem__(0, grad_bytes(model)))
    write_facts("compiled", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS,
                parameter_bytes=param_bytes(model), gradient_bytes=gbytes[0], optimizer_state_bytes=opt_state_bytes(opt),
                config="TransformerLM d512 x4, vocab 8000, torch.compile, bf16 autocast, AdamW, batch 8x256")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A batch-size finder's run: accelerate's find_executable_batch_size (what
HF Trainer's auto_find_batch_size uses) starts examples/transformer_lm.py's
model (d_model 768, 6 layers, bf16 autocast, AdamW) at a batch of 128 x 512
under a 6 GiB cap (torch.cuda.set_per_process_memory_fraction). Each try
that runs out of memory is caught: the batch is halved and training starts
again, until 6 steps run. Exit 0. The facts (_common.py): the OOMs caught,
the batch of the first, the batch that fit."""
import os
import sys

import torch
from accelerate.utils import find_executable_batch_size

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, capped_lm, lm_step, param_bytes, write_facts  # noqa: E402

CAP, SEQ, VOCAB, STEPS = 6 << 30, 512, 8000, 6


def main():
    counter = StepCounter()
    model = capped_lm(CAP, SEQ, VOCAB)
    tries = []

    @find_executable_batch_size(starting_batch_size=128)
    def train(batch_size):
        tries.append(batch_size)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        try:
            for _ in range(STEPS):
                lm_step(model, opt, batch_size, SEQ, VOCAB)
        except torch.cuda.OutOfMemoryError:
            model.zero_grad(set_to_none=True)  # as a restarted training loop would
            raise
        return batch_size

    fit = train()
    write_facts("oom_caught", optimizer_steps=counter.n, optimizer_step_calls=counter.n, oom_count=len(tries) - 1,
                oom_first_batch=tries[0] if len(tries) > 1 else None, fit_batch=fit, memory_cap_bytes=CAP,
                parameter_bytes=param_bytes(model),
                config="TransformerLM d768 x6, vocab 8000, bf16 autocast, AdamW, accelerate's find_executable_batch_size "
                       "from a batch of 128 x 512, 6 GiB cap")


if __name__ == "__main__":
    main()

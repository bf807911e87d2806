#!/usr/bin/env python3
"""An out-of-memory run whose OOM falls outside the stack windows: 6 steps of
examples/transformer_lm.py's model (d_model 768, 6 layers, bf16 autocast,
AdamW) at batch 4 x 512, then a batch of 64 under a 6 GiB cap
(torch.cuda.set_per_process_memory_fraction), so the forward of step 6 runs
out of memory on any GPU. The facts (_common.py) are written before the
OOMError propagates (exit 1): the step, the request, the peaks."""
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, capped_lm, lm_step, opt_state_bytes, param_bytes, write_facts  # noqa: E402

CAP, SEQ, VOCAB = 6 << 30, 512, 8000


def main():
    counter = StepCounter()
    model = capped_lm(CAP, SEQ, VOCAB)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = 0
    try:
        for step in range(8):
            lm_step(model, opt, 4 if step < 6 else 64, SEQ, VOCAB)
    except torch.cuda.OutOfMemoryError as err:
        m = re.search(r"Tried to allocate ([0-9.]+ [KMGT]?i?B)", str(err))
        write_facts("oom", optimizer_steps=counter.n, optimizer_step_calls=counter.n, oom_step=step,
                    oom_requested=m.group(1) if m else None, memory_cap_bytes=CAP,
                    parameter_bytes=param_bytes(model), optimizer_state_bytes=opt_state_bytes(opt),
                    config="TransformerLM d768 x6, vocab 8000, bf16 autocast, AdamW, batch 4 then 64 at step 6, 6 GiB cap")
        raise


if __name__ == "__main__":
    main()

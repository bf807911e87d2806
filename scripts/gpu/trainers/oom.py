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
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

CAP, SEQ, VOCAB = 6 << 30, 512, 8000


def main():
    lm = transformer_lm()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, CAP / total))
    counter = StepCounter()
    torch.manual_seed(0)
    model = lm.TransformerLM(768, 3072, 6, 12, max_positions=SEQ, vocab=VOCAB).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = 0
    try:
        for step in range(8):
            batch = 4 if step < 6 else 64
            x = torch.randint(0, VOCAB, (batch, SEQ), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, VOCAB).float(), x.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    except torch.cuda.OutOfMemoryError as err:
        m = re.search(r"Tried to allocate ([0-9.]+ [KMGT]?i?B)", str(err))
        write_facts("oom", optimizer_steps=counter.n, optimizer_step_calls=counter.n, oom_step=step,
                    oom_requested=m.group(1) if m else None, memory_cap_bytes=CAP,
                    parameter_bytes=param_bytes(model), optimizer_state_bytes=opt_state_bytes(opt),
                    config="TransformerLM d768 x6, vocab 8000, bf16 autocast, AdamW, batch 4 then 64 at step 6, 6 GiB cap")
        raise


if __name__ == "__main__":
    main()

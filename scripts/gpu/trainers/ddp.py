#!/usr/bin/env python3
"""torchrun + DistributedDataParallel (NCCL): a timm ViT-S/16 (22M parameters,
random init; examples/transformer_lm.py's model when timm is missing), bf16
autocast, AdamW, 6 steps of 16 images. Run with
  torchrun --standalone --nproc-per-node 1 scripts/gpu/trainers/ddp.py
Facts (_common.py) add the DDP settings that size its gradient buckets."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, transformer_lm, write_facts  # noqa: E402

STEPS, BATCH = 6, 16


def main():
    dist.init_process_group("nccl")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    counter = StepCounter()
    torch.manual_seed(0)
    try:
        import timm

        model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=100).cuda()
        make = lambda: (torch.randn(BATCH, 3, 224, 224, device="cuda"), torch.randint(0, 100, (BATCH,), device="cuda"))  # noqa: E731
        name = "timm vit_small_patch16_224"
    except ImportError:
        lm = transformer_lm()
        model = lm.TransformerLM(512, 2048, 6, 8, max_positions=256, vocab=8000).cuda()
        make = lambda: (torch.randint(0, 8000, (BATCH, 256), device="cuda"),) * 2  # noqa: E731
        name = "TransformerLM d512 x6"
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gbytes = 0
    for _ in range(STEPS):
        x, y = make()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = ddp(x)
            loss = F.cross_entropy(out.reshape(-1, out.size(-1)).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        gbytes = grad_bytes(model)
        opt.zero_grad(set_to_none=True)
    write_facts("ddp", optimizer_steps=counter.n, optimizer_step_calls=counter.n, micro_batches=STEPS,
                parameter_bytes=param_bytes(model), gradient_bytes=gbytes, optimizer_state_bytes=opt_state_bytes(opt),
                backend=dist.get_backend(), bucket_cap_mb=25, gradient_as_bucket_view=False,
                config=name + ", DDP, bf16 autocast, AdamW, batch %d" % BATCH)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch Lightning as issue 12 found it: a LightningModule whose
training_step calls self.emb, self.enc and self.head directly (the module
itself is never called), bf16-mixed, AdamW, 8 optimizer steps. Automatic
optimisation (forward and backward inside optimizer.step(closure)) by
default, --manual for manual optimisation. Facts: _common.py (parameter and
optimizer-state bytes measured at the end of each training batch: Lightning
moves the model to the CPU and drops its optimizer when fit returns)."""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, write_facts  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, D = 8, 8, 256, 8000, 512


class Roots(pl.LightningModule):
    def __init__(self, manual):
        super().__init__()
        self.automatic_optimization = not manual
        self.emb = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(D, 8, 4 * D, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB)
        self.grad_bytes = 0
        self.param_bytes = 0
        self.opt_bytes = 0

    def training_step(self, batch, idx):
        x = batch
        logits = self.head(self.enc(self.emb(x)))
        loss = F.cross_entropy(logits.view(-1, VOCAB).float(), x.view(-1))
        if not self.automatic_optimization:
            opt = self.optimizers()
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
            self.grad_bytes = grad_bytes(self)
        return loss

    def on_before_zero_grad(self, optimizer):
        self.grad_bytes = max(self.grad_bytes, grad_bytes(self))

    def on_train_batch_end(self, outputs, batch, idx):
        # Lightning moves the model to the CPU and drops the optimizer when
        # fit returns: measure while training runs.
        self.param_bytes = param_bytes(self)
        self.opt_bytes = max(self.opt_bytes, opt_state_bytes(self.trainer.optimizers[0]))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manual", action="store_true")
    a = ap.parse_args()
    counter = StepCounter()
    torch.manual_seed(0)
    model = Roots(a.manual)
    data = torch.utils.data.DataLoader([torch.randint(0, VOCAB, (SEQ,)) for _ in range(STEPS * BATCH)], batch_size=BATCH)
    trainer = pl.Trainer(max_steps=STEPS, precision="bf16-mixed", accelerator="gpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, data)
    write_facts("lightning_manual" if a.manual else "lightning_roots", optimizer_steps=trainer.global_step,
                optimizer_step_calls=counter.n, micro_batches=STEPS, forward_roots_per_step=3,
                parameter_bytes=model.param_bytes, gradient_bytes=model.grad_bytes,
                optimizer_state_bytes=model.opt_bytes,
                config="LightningModule emb/enc(4 layers, d512)/head called in training_step, bf16-mixed, AdamW, "
                       + ("manual" if a.manual else "automatic") + " optimisation")


if __name__ == "__main__":
    main()

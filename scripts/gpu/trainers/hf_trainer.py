#!/usr/bin/env python3
"""A Hugging Face Trainer run as a new user writes it: a small Llama (hidden
512, 4 layers), random init, random tokens, bf16, batch 4 x 256, gradient
accumulation 2, 8 optimizer steps (16 micro-batches). Facts: _common.py."""
import os
import sys
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import StepCounter, grad_bytes, opt_state_bytes, param_bytes, write_facts  # noqa: E402

STEPS, ACCUM, BATCH, SEQ, VOCAB = 8, 2, 4, 256, 8000


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return STEPS * ACCUM * BATCH

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


class Grads(TrainerCallback):
    """Gradient bytes after each optimizer step (before zero_grad)."""

    def __init__(self):
        self.bytes = 0

    def on_optimizer_step(self, args, state, control, model=None, **kw):
        if model is not None:
            self.bytes = grad_bytes(model)


def main():
    counter = StepCounter()
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=SEQ)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    forwards = [0]
    model.register_forward_pre_hook(lambda m, a: forwards.__setitem__(0, forwards[0] + 1))
    grads = Grads()
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=BATCH,
                             gradient_accumulation_steps=ACCUM, max_steps=STEPS, bf16=True, learning_rate=1e-4,
                             logging_steps=STEPS, save_strategy="no", report_to="none", disable_tqdm=True,
                             dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[grads])
    trainer.train()
    write_facts("hf_trainer", optimizer_steps=trainer.state.global_step, optimizer_step_calls=counter.n,
                forward_calls=forwards[0], micro_batches=STEPS * ACCUM, parameter_bytes=param_bytes(model),
                gradient_bytes=grads.bytes, optimizer_state_bytes=opt_state_bytes(trainer.optimizer),
                config="Llama hidden 512, 4 layers, vocab 8000, bf16 autocast, batch 4x256, accumulation 2, AdamW")


if __name__ == "__main__":
    main()

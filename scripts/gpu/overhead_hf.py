#!/usr/bin/env python3
"""The CPU-bound workload of scripts/gpu/overhead.sh (issue 15): an unmodified
Hugging Face Trainer run as a new user writes it. Llama (hidden 1024, 8
layers, 16 heads, vocab 32000), random init, random tokens, bf16, batch
8 x 512, 2 data-loader workers, 150 steps by default; on an H100 each step
takes ~25 ms and the GPU is mostly idle (the host is the bottleneck).

A callback records the time at every step end (the same in every arm);
--json-out gets train_runtime as the Trainer reports it and the step times
in ms (step i = end of step i - end of step i-1, i >= 1), and the main
thread's CPU time per step in ms (time.thread_time: the host work of the
step without the waits, far steadier than the wall time on a busy host)."""
import argparse
import json
import os
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

SEQ, VOCAB = 512, 32000


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


class StepTimes(TrainerCallback):
    def __init__(self):
        self.ends = []
        self.cpu = []

    def on_step_end(self, args, state, control, **kw):
        self.ends.append(time.perf_counter())
        self.cpu.append(time.thread_time())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json-out", required=True)
    a = ap.parse_args()
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=SEQ)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    cb = StepTimes()
    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=a.batch_size,
                             max_steps=a.steps, bf16=True, learning_rate=1e-4, logging_steps=50,
                             save_strategy="no", report_to="none", disable_tqdm=True,
                             dataloader_num_workers=a.workers, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(a.steps * a.batch_size), callbacks=[cb])
    out = trainer.train()
    torch.cuda.synchronize()
    steps = [(b - e) * 1e3 for e, b in zip(cb.ends, cb.ends[1:])]
    rec = {"workload": "hf_trainer", "train_runtime_s": out.metrics.get("train_runtime"),
           "step_times_ms": [round(t, 3) for t in steps], "first_step_index": 1,
           "step_cpu_ms": [round((b - e) * 1e3, 3) for e, b in zip(cb.cpu, cb.cpu[1:])],
           "loadavg": os.getloadavg(), "max_memory_allocated": torch.cuda.max_memory_allocated()}
    with open(a.json_out, "w") as f:
        json.dump(rec, f)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An unmodified transformers Trainer run (random-init Llama, random tokens,
gradient accumulation 2). Under `umpol run -p policies/llm-finetune.umpol`
the automatic phases must give the weights, optimizer and activations
classes their allocations, and count every optimizer step."""
import sys
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

import umpol


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=64, length=256, vocab=8000):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i]}


config = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1536,
                     num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4)
model = LlamaForCausalLM(config)
with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, learning_rate=1e-4,
                             save_strategy="no", report_to="none", logging_steps=1)
    Trainer(model=model, args=args, train_dataset=Tokens()).train()
stats = umpol.memory_stats()
for name, s in stats.items():
    print(f"class {name}: {s['allocations']} allocations, {s['saved']} saved blocks")
print("optimizer steps seen:", umpol.steps())
ok = all(stats[c]["allocations"] > 0 for c in ("weights", "optimizer", "activations")) \
    and umpol.steps() == 4
print("trainer", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)

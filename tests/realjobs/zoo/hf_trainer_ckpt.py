"""A Hugging Face Trainer job that checkpoints every 5 steps (model.safetensors + optimizer, scheduler,
RNG and args files per checkpoint), run unchanged under `supplyline doctor`. Usage: OUT_DIR [MAX_STEPS]."""

import sys

import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments


class Pairs(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(64, generator=g), "labels": torch.tensor(i % 4)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 4))
        self.register_buffer("table", torch.zeros(4_000_000))  # 16 MB of state that costs no compute

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


def main():
    out = sys.argv[1]
    max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    args = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=16,
        max_steps=max_steps,
        save_strategy="steps",
        save_steps=5,
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = Trainer(model=Model(), args=args, train_dataset=Pairs())
    trainer.train()
    print(f"GLOBAL_STEP {trainer.state.global_step}")


if __name__ == "__main__":
    main()

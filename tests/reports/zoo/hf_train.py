"""A small Hugging Face Trainer run with a slow dataset, diagnosed by supplyline's callback. Usage: OUT STEPS."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

from supplyline.integrations.transformers import SupplylineCallback


class Sleepy(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        time.sleep(0.003)
        return {"x": torch.randn(32), "labels": torch.tensor(i % 4)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(32, 4)

    def forward(self, x, labels=None):
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


if __name__ == "__main__":
    out, steps = sys.argv[1], int(sys.argv[2])
    cb = SupplylineCallback(out=out, steps=steps, quiet=True)
    args = TrainingArguments(
        output_dir=out + "-hf",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        max_steps=100,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        eval_strategy="steps",
        eval_steps=5,
        per_device_eval_batch_size=8,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=Model(),
        args=args,
        train_dataset=Sleepy(),
        eval_dataset=torch.utils.data.Subset(Sleepy(), range(16)),
        callbacks=[cb],
    )
    trainer.train()
    print(f"GLOBAL_STEP {trainer.state.global_step}")

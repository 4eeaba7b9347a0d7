"""A small Lightning run with a slow dataset, diagnosed by supplyline's callback. Usage: OUT STEPS."""

import sys
import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from supplyline.integrations.lightning import SupplylineCallback


class Sleepy(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(32), i % 4


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(32, 4)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    out, steps = sys.argv[1], int(sys.argv[2])
    cb = SupplylineCallback(out=out, steps=steps, quiet=True)
    trainer = L.Trainer(
        max_epochs=5,
        callbacks=[cb],
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=1,
        limit_val_batches=2,
        val_check_interval=10,
    )
    trainer.fit(Model(), DataLoader(Sleepy(), batch_size=8), DataLoader(Sleepy(), batch_size=8))
    print(f"GLOBAL_STEP {trainer.global_step}")

"""GPU check job: a small model fed from host memory, with pin_memory / non_blocking / per-step .item()
chosen on the command line, so the doctor's transfer share and sync counts can be compared.

    python train_transfer.py --pin 0|1 --non-blocking 0|1 --item 0|1 [--steps 300]
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def transfer_dataset():
    """Module-level, so `supplyline tune train_transfer.py:transfer_dataset --transfer` can load it."""
    return TensorDataset(torch.randn(4096, 4096), torch.randint(0, 10, (4096,)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pin", type=int, default=0)
    ap.add_argument("--non-blocking", type=int, default=0)
    ap.add_argument("--item", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(a.steps * 256, 4096), torch.randint(0, 10, (a.steps * 256,)))
    for x, y in DataLoader(data, batch_size=256, pin_memory=bool(a.pin), num_workers=2):
        x, y = x.to(dev, non_blocking=bool(a.non_blocking)), y.to(dev, non_blocking=bool(a.non_blocking))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.item:
            print(f"loss {loss.item():.4f}", end="\r")

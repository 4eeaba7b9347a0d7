"""Planted: a synchronous checkpoint every 3 steps of a ~32 MB model."""
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    out = sys.argv[1]
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(4096, 2048), torch.randint(0, 10, (4096,)))
    for step, (x, y) in enumerate(DataLoader(data, batch_size=8)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 3 == 0:
            torch.save(model.state_dict(), os.path.join(out, "ckpt.pt"))

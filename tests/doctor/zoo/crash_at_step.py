"""Crashes at step 12 with the script's own exception."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    model = nn.Linear(32, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(1000, 32), torch.randint(0, 2, (1000,)))
    for step, (x, y) in enumerate(DataLoader(data, batch_size=10)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 12:
            raise RuntimeError("planted failure at step 12")

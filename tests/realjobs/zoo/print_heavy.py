"""dcgan-shaped: a small loop that prints a progress line per batch, its stdout piped to a slow
reader. Usage: [--async] [STEPS]. With --async the script applies supplyline.fixes.async_stdout()."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if "--async" in sys.argv:
    from supplyline.fixes import async_stdout

    async_stdout()
steps = int(next((a for a in sys.argv[1:] if a.isdigit()), "60"))
torch.manual_seed(0)
data = TensorDataset(torch.randn(steps * 8, 32), torch.randint(0, 4, (steps * 8,)))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(DataLoader(data, batch_size=8)):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"[{i}/{steps}] Loss_D: {loss.item():.4f} " + "." * 16000, flush=True)

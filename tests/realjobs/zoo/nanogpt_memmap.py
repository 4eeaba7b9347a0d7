"""nanoGPT-shaped: batches from a memmap with get_batch (no DataLoader), evaluation inside the loop
every 10 iterations (``estimate_loss`` under ``@torch.no_grad()`` with model.eval/train).

Usage: DATA_DIR [ITERS].
"""

import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

data_dir = sys.argv[1]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 40
block, batch, vocab = 32, 8, 256
eval_interval, eval_iters = 10, 10
torch.manual_seed(0)

path = os.path.join(data_dir, "train.bin")
if not os.path.exists(path):
    np.random.default_rng(0).integers(0, vocab, size=100_000, dtype=np.uint16).tofile(path)


def get_batch():
    data = np.memmap(path, dtype=np.uint16, mode="r")  # re-opened per batch, as nanoGPT does
    ix = torch.randint(len(data) - block - 1, (batch,))
    x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix])
    return x, y


model = nn.Sequential(nn.Embedding(vocab, 64), nn.Linear(64, 256), nn.GELU(), nn.Linear(256, vocab))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = []
    for _ in range(eval_iters):
        x, y = get_batch()
        losses.append(F.cross_entropy(model(x).view(-1, vocab), y.view(-1)).item())
    model.train()
    return sum(losses) / len(losses)


for it in range(iters):
    if it % eval_interval == 0:
        print(f"step {it}: val loss {estimate_loss():.4f}")
    x, y = get_batch()
    loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"ITERS {iters}")

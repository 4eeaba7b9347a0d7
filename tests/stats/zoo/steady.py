"""A steady job for the compare gate: each batch costs a planted sleep (argument, ms) plus a tiny model step.

Usage: steady.py [SLEEP_MS_PER_BATCH]. A sleep is as long under a busy neighbour as on an idle machine,
so the step time moves little from run to run and a planted change in the sleep is a planted slowdown.
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SLEEP_S = (float(sys.argv[1]) if len(sys.argv) > 1 else 8.0) / 1000.0


class Planted(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(SLEEP_S)
        return torch.randn(16), i % 4


if __name__ == "__main__":
    torch.set_num_threads(1)  # a tiny model: extra threads only add scheduling noise on a shared machine
    torch.manual_seed(0)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Planted(), batch_size=None):
        loss = nn.functional.cross_entropy(model(x.unsqueeze(0)), torch.tensor([y]))
        opt.zero_grad()
        loss.backward()
        opt.step()

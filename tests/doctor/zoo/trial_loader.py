"""Planted for the fix trial: per-sample Python work with num_workers=0. Each sample says which
DataLoader worker made it (-1: the training thread), and every step writes the workers it saw.

python trial_loader.py OUT_DIR
"""

import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info


class PythonPrep(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:
            for k in range(64):
                acc = acc * 0.5 + k
        info = get_worker_info()
        return torch.randn(64), i % 10, info.id if info is not None else -1


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = open(os.path.join(sys.argv[1], "workers.log"), "w")
    for step, (x, y, worker) in enumerate(DataLoader(PythonPrep(), batch_size=16, shuffle=True, num_workers=0)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.write(f"{step} {' '.join(str(w) for w in sorted(set(worker.tolist())))}\n")
        seen.flush()

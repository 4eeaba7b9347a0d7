"""Prints its own data-time / step-time meter, as many training scripts do."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Mixed(Dataset):
    def __len__(self):
        return 8 * 70

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(256), i % 10


if __name__ == "__main__":
    # One intra-op thread: on a crowded 2-core machine, OpenMP threads spinning against other jobs
    # would drown the planted cause in scheduling noise.
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data_time = step_time = 0.0
    it = iter(DataLoader(Mixed(), batch_size=8, num_workers=0))
    step = 0
    end = time.perf_counter()
    while True:
        try:
            x, y = next(it)
        except StopIteration:
            break
        fetched = time.perf_counter()
        for _ in range(3):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        now = time.perf_counter()
        if step >= 1:  # like the doctor, leave the first step out as warm-up
            data_time += fetched - end
            step_time += now - end
        end = now
        step += 1
    print(f"METER data_share={data_time / step_time:.4f}")

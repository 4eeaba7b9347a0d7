"""A small DDP job on gloo, as users write them. Planted problems by flag:
--slow-rank R --slow-ms MS: rank R's dataset sleeps MS per sample (a straggler on input);
--crash-rank R --crash-step S: rank R raises at step S; --destroy: destroy the process group at the end.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Samples(Dataset):
    def __init__(self, n: int, delay_s: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 64, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow disk or decode on this rank only
        return self.x[i], self.y[i]


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=0.0)
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-step", type=int, default=-1)
    p.add_argument("--destroy", action="store_true")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = Samples(a.samples, a.slow_ms / 1e3 if rank == a.slow_rank else 0.0)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    started = time.perf_counter()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            if rank == a.crash_rank and step == a.crash_step:
                raise RuntimeError(f"planted failure on rank {rank} at step {step}")
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"rank {rank} final loss {loss.item():.4f} loop_s {time.perf_counter() - started:.4f}")
    if a.destroy:
        dist.destroy_process_group()

"""Planted: torchdata's StatefulDataLoader over per-sample Python work with num_workers=0.

Prints the loader's class and settings once, its state's batch count every 10 steps, and at the end saves the loader's ``state_dict()``,
loads it into a fresh StatefulDataLoader and prints the next sample indices both produce: equal when resuming works.

python stateful_starved.py STEPS [--workers N]   (--workers: the fix written by hand, for benchmarks/loaders.py)
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader


class PythonPrep(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)  # the sample depends on its index only, whoever loads it
        x = torch.randn(64, generator=g)
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:  # a Python loop standing in for decoding
            for k in range(64):
                acc = acc * 0.5 + k
        return x, i % 10, i


def yielded(state):
    """Batches handed out, as the state says: kept at the top with num_workers=0, in the main
    process's snapshot with workers."""
    if "_snapshot" in state:
        return state["_snapshot"]["_snapshot_step"] + state["_steps_since_snapshot"]
    return state["_num_yielded"]


def main():
    steps = int(sys.argv[1])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    if "--workers" in sys.argv:  # the same setting written by hand
        n = int(sys.argv[sys.argv.index("--workers") + 1])
        settings = {"num_workers": n, "prefetch_factor": 4, "persistent_workers": True}
    else:
        settings = {"num_workers": 0}
    loader = StatefulDataLoader(PythonPrep(), batch_size=16, shuffle=True, **settings)
    print(
        f"loader {type(loader).__name__} num_workers={loader.num_workers} prefetch_factor={loader.prefetch_factor} "
        f"persistent_workers={loader.persistent_workers}",
        flush=True,
    )
    first = None
    step = 0
    batches = iter(loader)
    for step, (x, y, _) in enumerate(batches):
        if step == 1:  # the script's own rate: from the second batch on, start-up left out
            first = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 9:  # a checkpoint would save this: the batches the loader has handed out
            print(f"state at step {step} num_yielded {yielded(loader.state_dict())}", flush=True)
        if step + 1 == steps:
            break
    if first is not None and step > 1:
        print(f"rate {(step - 1) / (time.perf_counter() - first):.2f} steps/s", flush=True)
    state = loader.state_dict()
    resumed = StatefulDataLoader(PythonPrep(), batch_size=16, shuffle=True, **settings)
    resumed.load_state_dict(state)
    print(f"state num_workers={resumed.num_workers} yielded {yielded(state)}", flush=True)
    print(f"next {next(batches)[2][:4].tolist()} resumed {next(iter(resumed))[2][:4].tolist()}", flush=True)


if __name__ == "__main__":
    main()

"""Stack-sampler CPU per sample, in µs: one data-wait sample inside a num_workers=0 DataLoader whose
dataset runs a PIL/numpy transform, and one compute sample inside a module's forward.

A training thread is parked at a fixed point of each stack (an Event inside the transform, or
inside forward); the benchmark thread calls the sampler's per-sample routine on that frozen stack
many times and divides its own thread CPU time. Repeated ROUNDS times: the median and the spread.

    PYTHONPATH=src python benchmarks/sampler_cost.py
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from supplyline.collect.stack_sampler import StackSampler
from supplyline.collect.steps import StepClock

CALLS, ROUNDS = 5000, 7
parked, release = threading.Event(), threading.Event()


class Park:
    def __call__(self, img: Image.Image) -> np.ndarray:
        parked.set()
        release.wait()
        return np.array(img.resize((8, 8)))


class Images(Dataset):
    def __init__(self) -> None:
        self.transform = Park()

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> np.ndarray:
        return self.transform(Image.new("RGB", (16, 16)))


class Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parked.set()
        release.wait()
        return x


def data_wait_stack() -> None:
    for _batch in DataLoader(Images(), batch_size=2, num_workers=0):
        break


def compute_stack() -> None:
    Net()(torch.zeros(1))


def per_sample_us(target, phase: str) -> list[float]:
    parked.clear()
    release.clear()
    worker = threading.Thread(target=target)
    worker.start()
    parked.wait()
    sampler = StackSampler(StepClock())
    frame = sys._current_frames()[worker.ident]
    rounds = []
    for _ in range(ROUNDS):
        c0 = time.thread_time()
        for _ in range(CALLS):
            sampler._record(frame, phase)
        rounds.append((time.thread_time() - c0) / CALLS * 1e6)
    release.set()
    worker.join()
    return rounds


def main() -> None:
    for name, target, phase in (("data wait", data_wait_stack, "data_wait"), ("compute", compute_stack, "unhooked")):
        r = per_sample_us(target, phase)
        print(
            f"{name:9s}: {statistics.median(r):5.1f} µs per sample (min {min(r):.1f}, max {max(r):.1f}, {ROUNDS} rounds)"
        )


if __name__ == "__main__":
    main()

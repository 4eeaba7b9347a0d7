"""A small CPU training job for `supplyline demo`: a tiny CNN fed by a DataLoader with 2 workers
whose ``__getitem__`` does real per-sample CPU work (decode-and-augment stand-in), ~10 s in all.

Run directly: python demo_train.py [--seconds 8] [--workers 2] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Images made and smoothed on the fly: the per-sample CPU cost a JPEG decode + augment has."""

    def __init__(self, length: int = 100_000, size: int = 64, rounds: int = 12) -> None:
        self.length, self.size, self.rounds = length, size, rounds

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(index)
        img = rng.random((3, self.size, self.size), dtype=np.float32)
        for _ in range(self.rounds):  # a box blur, done the slow way on purpose
            img = (img + np.roll(img, 1, axis=1) + np.roll(img, 1, axis=2)) / 3.0
        img = (img - img.mean()) / (img.std() + 1e-6)
        return torch.from_numpy(img), int(index % 10)


def _one_thread(_: int) -> None:
    torch.set_num_threads(1)  # workers are processes: one thread each, as in real loaders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="training time budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    # One intra-op thread for this tiny model: extra OpenMP threads only spin on a small machine.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(
        SyntheticImages(),
        batch_size=args.batch_size,
        num_workers=args.workers,
        shuffle=True,
        worker_init_fn=_one_thread if args.workers else None,
        persistent_workers=False,
    )
    start = time.monotonic()
    steps, loss_value = 0, float("nan")
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        loss_value = loss.item()
        if time.monotonic() - start >= args.seconds:
            break
    elapsed = time.monotonic() - start
    print(
        f"demo_train: {steps} steps in {elapsed:.1f} s ({steps * args.batch_size / elapsed:.0f} samples/s), "
        f"loss {loss_value:.3f}",
        flush=True,
    )


if __name__ == "__main__":
    main()

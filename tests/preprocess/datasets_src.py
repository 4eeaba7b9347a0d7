"""Datasets for the preprocess tests.

conftest copies this file into a temporary directory as ``pp_datasets.py`` and imports it from
there, as a user's module would be (spawn-started workers import it by that name too).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

FAST_MS = 1.0
SLOW_MS = 6.0


def busy_ms(ms: float) -> None:
    """Spin until this thread has used ``ms`` of CPU: a known cost however busy the machine is."""
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        pass


class Busy:
    def __init__(self, ms: float) -> None:
        self.ms = ms

    def __call__(self, x):
        busy_ms(self.ms)
        return x

    def __repr__(self) -> str:
        return f"Busy({self.ms})"


class Compose:
    """torchvision.transforms.Compose's shape: a ``.transforms`` list applied in order."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ThreeStages(Dataset):
    """Fast, planted-slow, fast: the slow stage's true share is SLOW / (SLOW + 2 FAST)."""

    def __init__(self, n: int = 30) -> None:
        self.n = n
        self.transform = Compose([Busy(FAST_MS), Busy(SLOW_MS), Busy(FAST_MS)])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return self.transform(np.full((4,), i, np.float32))


class AlbuCompose:
    """albumentations.Compose's shape: stages take and return keyword dicts (image=...)."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, **data):
        for t in self.transforms:
            data = t(**data)
        return data


class AlbuStage:
    def __init__(self, ms: float) -> None:
        self.ms = ms

    def __call__(self, image, **rest):
        busy_ms(self.ms)
        return {"image": image, **rest}


class AlbuStyle(Dataset):
    def __init__(self) -> None:
        self.transform = AlbuCompose([AlbuStage(FAST_MS), AlbuStage(SLOW_MS)])

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i):
        return self.transform(image=np.zeros((8, 8, 3), np.uint8))["image"]


def slow_step(x):
    busy_ms(SLOW_MS)
    return x


def fast_step(x):
    busy_ms(FAST_MS)
    return x


class CustomAttr(Dataset):
    """The chain lives under a name supplyline does not guess: found only with --transform-attr."""

    def __init__(self) -> None:
        self.steps = [fast_step, slow_step]

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i):
        x = i
        for step in self.steps:
            x = step(x)
        return x


def normalize_pixels(img):
    out = np.empty(img.shape, np.float32)
    height, width = img.shape
    for y in range(height):  # LOOP
        for x in range(width):
            out[y, x] = (img[y, x] - 127.5) / 64.0
    return out


class PixelLoop(Dataset):
    def __init__(self) -> None:
        self.transform = Compose([np.asarray, normalize_pixels, torch.from_numpy])

    def __len__(self) -> int:
        return 20

    def __getitem__(self, i):
        return self.transform(np.full((32, 32), i % 255, np.uint8))


class Churn(Dataset):
    """PIL -> numpy -> PIL -> tensor: three conversions, one back to PIL."""

    def __init__(self) -> None:
        self.transform = Compose([np.asarray, Image.fromarray, lambda im: torch.from_numpy(np.array(im))])

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i):
        return self.transform(Image.new("RGB", (16, 16), (i, 0, 0)))


def add_noise(x):
    return x + np.random.rand(*x.shape)


class DeterministicThenRandom(Dataset):
    def __init__(self) -> None:
        self.transform = Compose([Busy(3.0), add_noise])

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i):
        return self.transform(np.full((4,), float(i)))


class GilBound(Dataset):
    """Pure-Python arithmetic: holds the GIL the whole time."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i):
        return sum(k * k for k in range(20000 + i))


class NumpyHeavy(Dataset):
    """Large sorts and sums: NumPy releases the GIL while it works."""

    def __init__(self) -> None:
        self.data = np.random.default_rng(0).random(300_000)

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i):
        return float(np.sort(self.data)[i] + self.data.sum())


class Raising(Dataset):
    BAD = 3

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i):
        if i == self.BAD:
            raise ValueError(f"corrupt record {i}")
        return np.full((4,), i, np.float32)


class NotPicklable(Dataset):
    def __init__(self) -> None:
        self.transform = lambda x: x * 2  # a lambda cannot be pickled for spawn-started workers

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i):
        busy_ms(0.5)
        return self.transform(np.full((4,), i, np.float32))


class Empty(Dataset):
    def __len__(self) -> int:
        return 0

    def __getitem__(self, i):
        raise IndexError(i)


class Tensors(Dataset):
    """3x32x32 float tensors: a batch of 16 is 196608 bytes of tensor storage."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i):
        return torch.full((3, 32, 32), float(i)), i


class JpegFiles(Dataset):
    def __init__(self, root: str) -> None:
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".jpg"))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        return np.asarray(image)[::4, ::4].copy()


def make_jpegs(root: str, count: int = 6, size: int = 384) -> None:
    rng = np.random.default_rng(1)
    os.makedirs(root, exist_ok=True)
    for n in range(count):
        noise = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
        Image.fromarray(noise).save(os.path.join(root, f"img{n}.jpg"), quality=90)


three_stages = ThreeStages()
raising = Raising()
unpicklable = NotPicklable()
empty = Empty()
NOT_A_DATASET = 42


class Sleeper(Dataset):
    """Waits (as on a disk or network read) more than it computes."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i):
        time.sleep(0.003)
        return i


class OneSlowIndex(Dataset):
    SLOW = 4

    def __len__(self) -> int:
        return 20

    def __getitem__(self, i):
        busy_ms(15.0 if i == self.SLOW else 0.3)
        return i

"""A small image dataset with the usual problems, for ``supplyline preprocess`` (see docs/preprocess.md).

    python docs/examples/preprocess_demo.py /tmp/demo_images      # writes 64 JPEGs once
    supplyline preprocess docs/examples/preprocess_demo.py:train_set

Its chain: decode with PIL, a random crop done through a PIL round trip, a per-pixel Python loop
normalizing the image, and a conversion to a tensor.
"""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

ROOT = os.environ.get("DEMO_IMAGES", "/tmp/demo_images")


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


def random_crop(image: Image.Image) -> Image.Image:
    array = np.asarray(image)
    y, x = random.randint(0, 32), random.randint(0, 32)
    return Image.fromarray(array[y : y + 96, x : x + 96])


def normalize(image: Image.Image) -> np.ndarray:
    array = np.asarray(image, dtype=np.float32)
    out = np.empty_like(array)
    for y in range(array.shape[0]):
        for x in range(array.shape[1]):
            out[y, x] = (array[y, x] - 127.5) / 64.0
    return out


def to_tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


class Images(Dataset):
    def __init__(self, root: str = ROOT) -> None:
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".jpg"))
        self.transform = Compose([random_crop, normalize, to_tensor])

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        image = Image.open(self.paths[index]).convert("RGB").resize((128, 128))
        return self.transform(image), index % 10


def write_images(root: str, count: int = 64) -> None:
    rng = np.random.default_rng(0)
    os.makedirs(root, exist_ok=True)
    for n in range(count):
        base = rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)
        photo = Image.fromarray(base).resize((640, 480), Image.BICUBIC)
        photo.save(os.path.join(root, f"{n:04d}.jpg"), quality=90)


if __name__ == "__main__":
    write_images(sys.argv[1] if len(sys.argv) > 1 else ROOT)
else:
    train_set = Images() if os.path.isdir(ROOT) else None

"""torchvision-style image dataset with a costly PIL/numpy transform, loaded with num_workers=0.
Usage: [STEPS]."""

import sys

import numpy as np
import torch
from PIL import Image, ImageFilter
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class Blur:
    def __call__(self, img):
        return img.filter(ImageFilter.GaussianBlur(radius=4))  # the costly step


class ToTensor:
    def __call__(self, img):
        return torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)


class Images(Dataset):
    def __init__(self, n, transform):
        self.n, self.transform = n, transform
        self.base = Image.fromarray(np.random.default_rng(0).integers(0, 255, (160, 160, 3), dtype=np.uint8))

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transform(self.base), i % 10


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
loader = DataLoader(Images(steps * 8, Compose([Blur(), ToTensor()])), batch_size=8, num_workers=0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

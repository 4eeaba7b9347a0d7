"""Prints one long, numbered line every step (stdout) and every 5th step (stderr), like many training scripts.

Usage: chatty.py [SLEEP_S_PER_SAMPLE]. Each line ends with END so a test can tell a whole line from a cut one.
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.002
PAYLOAD = "abcdefghijklmnopqrstuvwxyz0123456789" * 4  # longer than a narrow terminal: must not be re-wrapped


class Sleepy(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(DELAY)
        return torch.randn(32), i % 4


if __name__ == "__main__":
    torch.set_num_threads(1)  # a tiny model: extra threads only add scheduling noise on a shared machine
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(DataLoader(Sleepy(), batch_size=4)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"LINE {step:04d} loss={loss.item():.4f} {PAYLOAD} END")
        if step % 5 == 0:
            print(f"WARN {step:04d} {PAYLOAD} END", file=sys.stderr)

"""Planted for the fix trials: every step prints, logs through a FileHandler, writes and fsyncs
its own log, and every 3rd step saves a ~32 MB checkpoint (with its step) to the same path.

python trial_writes.py OUT_DIR
"""

import logging
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    out = sys.argv[1]
    torch.set_num_threads(1)
    logging.basicConfig(filename=os.path.join(out, "logging.log"), level=logging.INFO, format="%(message)s")
    log = logging.getLogger("train")
    own = open(os.path.join(out, "own.log"), "w")
    model = nn.Linear(64, 10)
    table = torch.randn(8 * 2**20)  # saved with the weights, like an embedding cache
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(8192, 64), torch.randint(0, 10, (8192,)))
    for step, (x, y) in enumerate(DataLoader(data, batch_size=16)):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"print {step}")
        log.info("log %d", step)
        for _ in range(5):
            own.write(f"own {step}\n")
            own.flush()
            os.fsync(own.fileno())
        if step % 3 == 2:
            torch.save({"step": step, "model": model.state_dict(), "table": table}, os.path.join(out, "ckpt.pt"))

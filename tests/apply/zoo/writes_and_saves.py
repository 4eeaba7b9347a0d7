"""Planted: every step prints, logs through a FileHandler, writes and fsyncs its own log, and saves
a checkpoint every 3 steps to the same path (keeping a copy of the weights it saved).

python writes_and_saves.py OUT_DIR STEPS [--bad-save]
"""

import logging
import os
import sys

import torch
from torch import nn

if __name__ == "__main__":
    out, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    logging.basicConfig(filename=os.path.join(out, "logging.log"), level=logging.INFO, format="%(message)s")
    log = logging.getLogger("train")
    own = open(os.path.join(out, "own.log"), "w")
    model = nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        loss = model(torch.randn(8, 256)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"print {step}")
        log.info("log %d", step)
        own.write(f"own {step}\n")
        own.flush()
        os.fsync(own.fileno())
        if step % 3 == 2:
            torch.save({"step": step, "model": model.state_dict()}, os.path.join(out, "ckpt.pt"))
            saved = {k: v.clone() for k, v in model.state_dict().items()}
    own.close()
    with open(os.path.join(out, "expected.pt"), "wb") as fh:  # a file object: written on the spot
        torch.save(saved, fh)
    if "--bad-save" in sys.argv:
        torch.save(model.state_dict(), os.path.join(out, "no-such-dir", "ckpt.pt"))
    print("done")

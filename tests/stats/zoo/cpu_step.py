"""A CPU-bound job for the compare gate: each step is about ARG ms of the training thread's own CPU work.

Usage: cpu_step.py [MS_PER_STEP]. No DataLoader workers and one torch thread: the step is the
training thread computing, so a busy neighbour lengthens it by exactly the time the OS keeps that
thread off a core, the wait the gate takes out.
"""

import sys

import torch
from torch import nn

# A fixed amount of work, not a fixed time (about 1 ms per 25k iterations of this loop on our
# machines): a smaller share of a core shows as a longer step, as in a real CPU-bound step.
ITERATIONS = int((float(sys.argv[1]) if len(sys.argv) > 1 else 1.0) * 25_000)


def _work() -> int:
    x = 0
    for _ in range(ITERATIONS):
        x += 1
    return x


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(100_000):
        _work()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

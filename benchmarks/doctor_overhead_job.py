"""The job measured by doctor_overhead.py: a ~5 ms/step CPU training loop with a DataLoader.

Prints its own loop time (perf_counter around the training loop only, so interpreter and torch
start-up are excluded) and the final loss, which must be identical with and without the doctor.
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(steps * 128, 512), torch.randint(0, 10, (steps * 128,)))
    loader = DataLoader(data, batch_size=128, shuffle=False)
    t0, c0 = time.perf_counter(), time.process_time()
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    # process_time counts every thread of this process, so the doctor's sampler threads are in it.
    print(f"RESULT loop_s={elapsed:.6f} cpu_s={cpu:.6f} steps={steps} loss={loss.item():.10f}")

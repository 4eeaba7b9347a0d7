"""The job measured by doctor_overhead.py: a ~5 ms/step CPU training loop with a DataLoader.

Usage: doctor_overhead_job.py [STEPS] [BATCH] [WIDTH]; the defaults (128, 512) give the ~5 ms step;
the stress case uses a batch of 16 and a width of 64, a step of about 1 ms of CPU work.

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
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(steps * batch, width), torch.randint(0, 10, (steps * batch,)))
    loader = DataLoader(data, batch_size=batch, shuffle=False)
    t0, c0 = time.perf_counter(), time.process_time()
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    # process_time counts every thread of this process, so the doctor's sampler threads are in it.
    print(f"RESULT loop_s={elapsed:.6f} cpu_s={cpu:.6f} steps={steps} loss={loss.item():.10f}")

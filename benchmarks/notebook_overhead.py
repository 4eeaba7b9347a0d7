"""How much ``%%supplyline`` slows a training cell: the same cell plain and under the magic, in one kernel.

One real Jupyter kernel (nbclient, ipykernel) runs PAIRS pairs of cells, alternating which comes
first: a plain cell and a ``%%supplyline --no-what-if --no-try --quiet`` cell, each training a
freshly seeded ~5 ms/step MLP for STEPS steps from a DataLoader (the job of doctor_overhead.py)
and printing its loop time (perf_counter around the loop only) and its final loss. The figure is
the median of the per-pair ratios (magic / plain) with a 95% bootstrap interval over the pairs;
the losses must be identical, since the doctor must not change what the cell computes, and a
plain cell after a diagnosed one shows that the hooks came off.

    python benchmarks/notebook_overhead.py [--pairs 10] [--steps 600]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

from supplyline.analyze.stats import median_interval

KERNEL = "supplyline-bench-python"
RESULT = re.compile(r"RESULT loop_s=(\S+) loss=(\S+)")

SETUP = """
import time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)


def job(steps, batch=128, width=512):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(steps * batch, width), torch.randint(0, 10, (steps * batch,)))
    return model, opt, DataLoader(data, batch_size=batch, shuffle=False)
"""

CELL = """{magic}model, opt, loader = job({steps})
t0 = time.perf_counter()
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"RESULT loop_s={{time.perf_counter() - t0:.6f}} loss={{loss.item():.10f}}")
"""


def _kernel_spec(root: str) -> None:
    spec = os.path.join(root, "kernels", KERNEL)
    os.makedirs(spec)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    with open(os.path.join(spec, "kernel.json"), "w") as fh:
        json.dump({"argv": argv, "display_name": KERNEL, "language": "python"}, fh)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=600)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="supplyline-nb-bench-")
    _kernel_spec(root)
    os.environ["JUPYTER_PATH"] = root
    magic = f"%%supplyline --no-what-if --no-try --quiet --out {os.path.join(root, 'report')}\n"
    order: list[bool] = []  # per measured cell: under the magic?
    cells = [nbformat.v4.new_code_cell("%load_ext supplyline"), nbformat.v4.new_code_cell(SETUP)]
    for i in range(args.pairs):
        for under in (False, True) if i % 2 == 0 else (True, False):
            order.append(under)
            cells.append(nbformat.v4.new_code_cell(CELL.format(magic=magic if under else "", steps=args.steps)))
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    NotebookClient(nb, kernel_name=KERNEL, timeout=1800, resources={"metadata": {"path": root}}).execute()
    plain: list[float] = []
    magic_s: list[float] = []
    losses = set()
    for under, cell in zip(order, nb.cells[2:]):
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        m = RESULT.search(text)
        if m is None:
            raise SystemExit(f"no RESULT line from a cell:\n{text}")
        (magic_s if under else plain).append(float(m.group(1)))
        losses.add(m.group(2))
    ratios = [d / p for p, d in zip(plain, magic_s)]
    ci = median_interval(ratios)
    step = median_interval([p / args.steps * 1e3 for p in plain])
    print(f"{args.pairs} alternating pairs of cells in one kernel, {args.steps} steps per cell")
    print(f"plain step {step.estimate:.2f} ms (95% CI {step.low:.2f}-{step.high:.2f})")
    print(
        f"%%supplyline / plain loop time: {ci.estimate:.4f} (95% CI {ci.low:.4f}-{ci.high:.4f}); "
        f"pairs {min(ratios):.3f}-{max(ratios):.3f}; = {(ci.estimate - 1) * step.estimate * 1e3:.0f} µs per step"
    )
    print(f"losses identical across all cells: {len(losses) == 1}")


if __name__ == "__main__":
    main()

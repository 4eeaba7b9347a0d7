"""Helpers for the doctor's fault cases: real child processes, real signals, real broken records, a real
full file system. Imported as ``doctor_faults_helpers`` (a module of its own: several test folders have
a conftest, and their names must not clash)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any

import faults_helpers
from faults_helpers import HANG_GUARD_S, SRC, assert_one_line, child_env, supplyline

# The shared pieces come from faults_helpers; these names are re-exported for the doctor's cases.
__all__ = ["HANG_GUARD_S", "SRC", "assert_one_line", "child_env", "supplyline"]

# A small training loop as users write them. Flags: --batches N, --workers W, --ready-after K (print
# "ready" after K steps, so a signal lands mid-training), --sleep S per step, --os-exit-at I CODE,
# --fail-item I (the dataset raises at item I).
TRAIN = """
import argparse, os, time
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __init__(self, n, fail):
        self.n, self.fail = n, fail
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if i == self.fail:
            raise ValueError(f"planted bad item {i}")
        return torch.full((4,), float(i))

p = argparse.ArgumentParser()
p.add_argument("--batches", type=int, default=60)
p.add_argument("--workers", type=int, default=0)
p.add_argument("--ready-after", type=int, default=-1)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--os-exit-at", type=int, nargs=2, default=(-1, 0))
p.add_argument("--fail-item", type=int, default=-1)
a = p.parse_args()
torch.manual_seed(0)
w = torch.zeros(4, 4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
loader = DataLoader(Items(a.batches * 4, a.fail_item), batch_size=4, num_workers=a.workers)
for i, x in enumerate(loader):
    (x @ w).sum().backward()
    opt.step()
    opt.zero_grad()
    if a.sleep:
        time.sleep(a.sleep)
    if i == a.ready_after:
        print("ready", flush=True)
    if i == a.os_exit_at[0]:
        os._exit(a.os_exit_at[1])
print("done", flush=True)
"""

# A DDP job on gloo; rank KILL_RANK kills itself with SIGKILL at step KILL_STEP (as the OOM killer would).
DDP_KILL = """
import os, signal, sys
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

kill_rank, kill_step = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(4096, 16), torch.randint(0, 4, (4096,)))
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
for step, (x, y) in enumerate(loader):
    if rank == kill_rank and step == kill_step:
        os.kill(os.getpid(), signal.SIGKILL)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", rank)
"""


def write(directory: str, name: str, source: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(textwrap.dedent(source))
    return path


def torchrun(args: Sequence[str], cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def start_supplyline(args: Sequence[str], cwd: str | None = None, group: bool = False) -> subprocess.Popen[str]:
    """``group``: in a process group of its own, to be signalled as a whole (as schedulers do)."""
    return subprocess.Popen(
        [sys.executable, "-m", "supplyline", *args],
        start_new_session=group,
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(proc: subprocess.Popen[str], marker: str) -> None:
    """Read the child's stdout until ``marker`` (the script says it is mid-training)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(
                f"the child ended before printing {marker!r}: {proc.stderr.read() if proc.stderr else ''}"
            )
        if marker in line:
            return
    raise AssertionError(f"gave up waiting for {marker!r}")


def no_supplyline_frames(text: str) -> None:
    """Any traceback shown is the user's (or torch's), never one through supplyline's own code."""
    ours = [line for line in text.splitlines() if line.strip().startswith("File ") and "supplyline" in line]
    assert not ours, "supplyline frames in a traceback:\n" + "\n".join(ours)
    assert "Terminated" not in text.replace("terminated", "")


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def no_temp_files(directory: str) -> None:
    """Atomic writes leave no half-written file behind, even when the disk filled up."""
    leftovers = [n for n in os.listdir(directory) if n.startswith(".") or n.endswith(".tmp")]
    assert not leftovers, leftovers


def small_tmpfs(directory: str, size: str = "64k") -> contextlib.AbstractContextManager[str]:
    """A real, small file system to fill (the shared helper; a report directory needs only 64k)."""
    return faults_helpers.small_tmpfs(directory, size)


def fill(directory: str) -> None:
    """Fill the file system under ``directory`` to the last byte."""
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
        try:
            while True:
                fh.write(b"\0")
        except OSError:
            pass


def rank_records(
    base: dict[str, Any], out: str, ranks: Sequence[int], world: int, edit: Callable[..., None] | None = None
) -> None:
    """Real rank folders made from a real record: ``DIR/rank-K/record.json`` of one job of ``world`` ranks."""
    for r in ranks:
        rec = json.loads(json.dumps(base))
        rec["distributed"] = {
            "rank": r,
            "world_size": world,
            "local_rank": r,
            "local_world_size": world,
            "node_rank": 0,
            "hostname": "node-a",
            "job_key": "job|127.0.0.1:1|2|0",
            "collectives": {},
        }
        if edit is not None:
            edit(r, rec)
        os.makedirs(os.path.join(out, f"rank-{r}"), exist_ok=True)
        with open(os.path.join(out, f"rank-{r}", "record.json"), "w", encoding="utf-8") as fh:
            json.dump(rec, fh)

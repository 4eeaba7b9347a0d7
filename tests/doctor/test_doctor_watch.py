"""The library form: ``with supplyline.watch() as run`` around a loop gives the same record."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import supplyline


def test_watch_records_steps_and_stops_early(tmp_path):
    model = nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(400, 16), torch.randint(0, 2, (400,))), batch_size=4)
    seen = 0
    with supplyline.watch(out=str(tmp_path), steps=20, what_if=False, quiet=True):
        for x, y in loader:
            seen += 1
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    assert seen == 20  # the 21st fetch closes step 20 and stops the loop before it returns a batch
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["target"]["kind"] == "library"
    assert len(record["steps"]["duration_s"]) == 20
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["outcome"]["reason"] == "stopped"
    # the hooks are gone afterwards
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    assert "supplyline" not in getattr(_BaseDataLoaderIter.__next__, "__module__", "")


def test_watch_that_cannot_attach_runs_the_block_with_one_warning(tmp_path):
    """torch that fails to import (a broken install): the doctor cannot attach, the block still runs."""
    code = (
        "import sys; sys.modules['torch'] = None\n"  # `import torch` now raises ImportError, as a broken install does
        "import supplyline\n"
        f"with supplyline.watch(out={str(tmp_path / 'report')!r}, steps=5) as run:\n"
        "    total = sum(range(10))\n"
        "print('block ran', total, run.report)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "block ran 45 None"
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("supplyline: warning: could not attach to the job (ModuleNotFoundError: import of torch")
    assert line.endswith("running it without diagnosis")


def test_watch_on_a_thread_other_than_main(tmp_path):
    """A notebook may train on a thread of its own: no signal handler can be set there, none is needed."""
    model = nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(400, 16), torch.randint(0, 2, (400,))), batch_size=4)
    done: list[BaseException | int] = []

    def train() -> None:
        try:
            with supplyline.watch(out=str(tmp_path), steps=10, what_if=False, quiet=True) as run:
                for x, y in loader:
                    nn.functional.cross_entropy(model(x), y).backward()
                    opt.step()
                    opt.zero_grad()
            done.append(len(run.record.steps["duration_s"]) if run.record else -1)
        except BaseException as exc:
            done.append(exc)

    thread = threading.Thread(target=train)
    thread.start()
    thread.join(timeout=300)  # a hang guard only
    assert done == [10]
    assert json.loads((tmp_path / "report.json").read_text())["outcome"]["reason"] == "stopped"

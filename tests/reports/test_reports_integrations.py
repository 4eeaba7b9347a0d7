"""Framework callbacks: the same record and report as `supplyline doctor`, with the framework's own steps.

Lightning and transformers are optional; the tests skip with the reason when they are not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from reports_helpers import child_env, zoo
from torch.utils.data import DataLoader, TensorDataset

from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import Controller, TorchHooks


def _run(script: str, out: str, steps: int, cwd: str) -> tuple[dict, dict, str]:
    proc = subprocess.run(
        [sys.executable, zoo(script), out, str(steps)],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(out, "record.json")) as fh:
        record = json.load(fh)
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    assert os.path.exists(os.path.join(out, "report.html")) and os.path.exists(os.path.join(out, "trace.json"))
    return record, report, proc.stdout


def test_external_boundaries_with_real_hooks() -> None:
    """The clock's external mode: steps end where the caller says, fetches and eval loops still count."""
    clock = StepClock()
    hooks = TorchHooks(clock, Controller())
    clock.external = True
    train = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
    evaluation = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=8)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hooks.install()
    try:
        for k, (x,) in enumerate(train):
            time.sleep(0.002)  # the model
            if k % 2 == 1:  # gradient accumulation: one update per two batches
                model(x).sum().backward()
                opt.step()
                opt.zero_grad()
                clock.external_boundary()
                if k == 3:
                    for _ in evaluation:  # an eval loop between steps: not a step, not data wait
                        pass
        clock.finish()
    finally:
        hooks.uninstall()
    st = clock.steps
    # The first step opens at the first fetch; boundaries after updates 1..4 give 4 steps.
    assert len(st["duration_s"]) == 4
    assert st["batches"] == [2, 2, 2, 2]
    assert clock.train_loader == id(train)
    assert clock.outside["eval_loader_wait"] > 0
    assert all(w > 0 for w in st["data_wait_s"])


@pytest.mark.slow
def test_lightning_callback(tmp_path) -> None:
    pytest.importorskip("lightning", reason="Lightning is not installed (pip install lightning)")
    record, report, stdout = _run("lightning_train.py", str(tmp_path / "out"), 10, str(tmp_path))
    assert "GLOBAL_STEP 10" in stdout  # the callback stopped Lightning through trainer.should_stop
    assert len(record["steps"]["duration_s"]) == 10 and record["outcome"]["reason"] == "stopped"
    roles = {ld["dataset_type"]: ld["role"] for ld in record["loaders"]}
    assert roles["Sleepy"] == "train"
    assert any("Lightning" in n for n in record["notes"])
    assert report["phase_share"]["data_wait"] > 0.05  # 24 ms of sleep per batch vs a 32x4 linear layer
    assert report["verdict"]["bound"] in ("input", "compute", "unknown")


@pytest.mark.slow
def test_transformers_callback(tmp_path) -> None:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")
    pytest.importorskip("accelerate", reason="the transformers Trainer needs accelerate (pip install accelerate)")
    record, report, stdout = _run("hf_train.py", str(tmp_path / "out"), 12, str(tmp_path))
    assert "GLOBAL_STEP 12" in stdout  # stopped through control.should_training_stop
    st = record["steps"]
    assert len(st["duration_s"]) == 12
    assert all(b >= 2 for b in st["batches"])  # gradient_accumulation_steps=2: two batches per optimizer step
    train = [ld for ld in record["loaders"] if ld["role"] == "train"]
    assert len(train) == 1 and train[0]["dataset_type"] == "Sleepy"
    assert report["phase_share"]["data_wait"] > 0.05

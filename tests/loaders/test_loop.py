"""A loop with no loader object (nanoGPT's ``get_batch`` on a memmap): the time from one update to the
next first model call is the step's data wait, attributed to the lines that build the batch; the fix
is written for the loop (its batch function inside a DataLoader), and nothing claims a trial or a
`run --apply` it cannot do.

The speed-up of the fix is measured in benchmarks/loaders.py --loop, not asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.nn.modules import module as torch_module

from supplyline import phases as P
from supplyline.collect.events import LOOP_TYPE
from supplyline.collect.loop_wait import LoopWait
from supplyline.collect.steps import StepClock

JOB = os.path.join(os.path.dirname(__file__), "zoo", "getbatch_starved.py")


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_window_ends_at_the_first_model_call_and_leaves_no_hook() -> None:
    clock = StepClock()
    loop = LoopWait(clock)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    clock.update(0)  # an update (no optimizer: backward stands in) opens the first step
    loop.arm()
    assert clock.phase == P.DATA_WAIT  # the sampler's samples land on the batch-building lines
    _spin(0.004)
    started = clock.enter(P.LOGGING)  # a print while building the batch: logging, not data wait
    _spin(0.003)
    clock.leave(P.LOGGING, started)
    assert clock.phase == P.DATA_WAIT  # back to the window after the hooked phase
    model(torch.ones(8, 4))
    wait, logged = clock.acc[P.DATA_WAIT], clock.acc[P.LOGGING]
    assert wait >= 0.004 and logged >= 0.003
    assert clock.batches == 1 and clock.phase is None
    assert not torch_module._global_forward_pre_hooks  # removed at the first call: the fast path again
    model(torch.ones(8, 4))  # later module calls of the step add nothing
    assert clock.acc[P.DATA_WAIT] == wait and clock.batches == 1
    assert loop.info is not None and loop.info.loader_type == LOOP_TYPE and loop.info.batch_size == 8
    assert loop.info.iter_stack and loop.info.iter_stack[0].startswith(__file__)  # the line calling the model


def test_no_window_once_a_dataloader_fed_the_job() -> None:
    clock = StepClock()
    loop = LoopWait(clock)
    clock.fetch_begin(1, time.perf_counter())
    clock.update(0)
    loop.arm()
    assert not torch_module._global_forward_pre_hooks and clock.phase is None
    loop.disarm()


@pytest.mark.flaky(reruns=1)  # the sampler takes 3-5 samples in the wait: one run in many names none
def test_a_starved_loop_is_named_judged_and_given_its_own_fix(
    tmp_path, doctor_job, words_follow_figures, one_screen
) -> None:
    # 60 observed steps, not 30: at 25 Hz the sampler took ~10 samples in 30 steps of ~20 ms, of which
    # 2-3 in the data wait (the samples land where the training thread gives up the GIL, in torch's
    # compute), and 1 run in 6 had none to name get_batch by. 60 steps give it 3-5.
    proc, rep = doctor_job(JOB, str(tmp_path), "200", flags=("--steps", "60"))
    d = rep["dataloader"]
    assert d["loader_type"] == LOOP_TYPE and d["num_workers"] == 0 and d["batch_size"] == 16, d
    assert rep["verdict"]["bound"] == "input", rep["verdict"]
    assert "building its batch in the training loop" in rep["verdict"]["sentence"]
    assert rep["phase_share"]["data_wait"] > 0.3 and d["stall"] == "prep", (rep["phase_share"], d)
    top = rep["findings"][0]
    assert top["check"] == "dataloader", top
    assert "yield `get_batch(...)` from an IterableDataset" in top["fix"], top["fix"]
    assert "DataLoader(batch_size=None, num_workers=2, persistent_workers=True" in top["fix"]
    assert "cannot try it in-process" in top["fix"] and "get_worker_info().id" in top["fix"]
    # The wait is attributed to the lines that build the batch: inside get_batch, or the loop's own line
    # that calls it (a sample can land on the call before get_batch's frame is entered or after it
    # returns: CI of stop 40 saw main's `x, y = get_batch(...)` on top).
    lines = rep["data_wait_lines"]
    assert lines, rep["data_wait_lines"]
    top_line = lines[0]
    source = Path(top_line["file"]).read_text().splitlines()[top_line["line"] - 1]
    assert top_line["function"] == "get_batch" or "get_batch(" in source, (lines[:3], source)
    assert not rep["trials"] and any("builds its batches itself" in n for n in rep["notes"]), rep["notes"]
    assert "Run:" not in proc.stderr and "+ x, y = next(batches)" in proc.stderr
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)


def test_a_healthy_loop_is_compute_bound(tmp_path, doctor_job, words_follow_figures, one_screen) -> None:
    proc, rep = doctor_job(JOB, str(tmp_path), "200", "--healthy", flags=())
    assert rep["dataloader"]["loader_type"] == LOOP_TYPE
    assert rep["verdict"]["bound"] == "compute", rep["verdict"]
    assert not any(f["check"] in ("dataloader", "preprocessing", "storage") for f in rep["findings"]), rep["findings"]
    assert not any("not tried" in n for n in rep["notes"]), rep["notes"]  # no loader fix to try: nothing to excuse
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the doctor's own fork-free path is the same; keep it short")
def test_the_loop_fix_by_hand_is_a_dataloader_the_doctor_sees(tmp_path, doctor_job) -> None:
    # The fix written as the report says: the loop's batches now come from a DataLoader, which the
    # doctor sees as the training loader (and no longer as the loop).
    _, rep = doctor_job(JOB, str(tmp_path), "200", "--workers", "1", flags=())
    assert rep["dataloader"]["loader_type"] == "DataLoader" and rep["dataloader"]["num_workers"] == 1


def test_run_apply_on_a_loop_says_what_to_change_by_hand(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "supplyline", "run", "--apply", "num_workers=2", JOB, str(tmp_path), "5"],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "no DataLoader was made, so nothing changed" in proc.stderr and "get_batch" in proc.stderr

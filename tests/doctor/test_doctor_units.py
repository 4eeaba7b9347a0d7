"""Fast unit tests of the doctor's pure parts: the step clock, the H2D argument parsing, the sync seam."""

from __future__ import annotations

import sys

import torch

from supplyline.collect.cuda_sync import SyncCounter
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import batch_nbytes, non_blocking_requested, targets_cuda

T, V = 1, 2  # loader ids: training and validation
OPT_D, OPT_G = 11, 12


def fetch(clock: StepClock, loader: int, t: float, wait: float = 0.001) -> None:
    counted = clock.fetch_begin(loader, t)
    clock.add_fetch(counted, wait, 0.0)


def test_one_step_per_batch_with_two_optimizers():
    c = StepClock()
    for i in range(5):
        fetch(c, T, float(i))
        c.update(OPT_D)
        c.update(OPT_G)
    fetch(c, T, 5.0)
    assert c.step_count == 5
    assert c.steps["batches"] == [1] * 5
    assert c.steps["duration_s"] == [1.0] * 5


def test_gradient_accumulation_makes_one_step_of_k_batches():
    c = StepClock()
    c.has_optimizer = True  # the optimizer was constructed before the loop
    t = 0.0
    for i in range(12):
        fetch(c, T, t)
        c.update(0)  # backward: not an update when an optimizer exists
        if (i + 1) % 4 == 0:
            c.update(OPT_D)
        t += 1
    fetch(c, T, t)
    assert c.step_count == 3
    assert c.steps["batches"] == [4, 4, 4]


def test_validation_loader_is_kept_outside_the_steps():
    c = StepClock()
    fetch(c, T, 0.0)
    c.update(OPT_D)
    fetch(c, T, 1.0)
    c.update(OPT_D)
    fetch(c, V, 2.0, wait=0.5)  # validation ends the open step
    fetch(c, V, 3.0, wait=0.5)
    fetch(c, T, 4.0)
    c.update(OPT_D)
    fetch(c, T, 5.0)
    assert c.step_count == 3
    assert c.steps["duration_s"] == [1.0, 1.0, 1.0]
    assert c.outside["eval_loader_wait"] == 1.0


def test_no_loader_uses_the_first_optimizer_as_boundary():
    c = StepClock()
    for _ in range(4):
        c.update(OPT_D)
        c.update(OPT_G)
    assert c.step_count == 3  # boundaries at each OPT_D update; the first opens the first step


def test_nested_phases_count_once():
    c = StepClock()
    fetch(c, T, c.t0)
    outer = c.enter("checkpoint")
    inner = c.enter("logging")  # a print inside torch.save
    assert inner < 0
    c.leave("logging", inner)
    c.leave("checkpoint", outer)
    assert c.acc["logging"] == 0.0 and c.acc["checkpoint"] > 0.0


def test_targets_cuda_parsing():
    assert targets_cuda(("cuda",), {})
    assert targets_cuda((torch.device("cuda", 0),), {})
    assert targets_cuda((0,), {})
    assert targets_cuda((), {"device": "cuda:1"})
    assert not targets_cuda(("cpu",), {})
    assert not targets_cuda((torch.float16,), {})
    assert not targets_cuda((True,), {})
    assert non_blocking_requested(("cuda", None, True), {})
    assert non_blocking_requested(("cuda",), {"non_blocking": True})
    assert not non_blocking_requested(("cuda",), {})


def test_batch_nbytes_walks_nested_batches():
    batch = {"x": torch.zeros(4, 8), "y": [torch.zeros(4, dtype=torch.int64), "label"]}
    assert batch_nbytes(batch) == 4 * 8 * 4 + 4 * 8


def test_sync_counter_attributes_to_the_user_line():
    counter = SyncCounter(is_user_file=lambda f: f == __file__)

    def library_call():  # stands in for torch's frame that warns
        counter.observe(sys._getframe())

    library_call()
    library_call()
    assert counter.total == 2
    (file, _line, fn), count = counter.by_line.most_common(1)[0]
    assert file == __file__ and fn == "library_call" and count == 2
    assert counter.install() is (torch.cuda.is_available())
    counter.uninstall()


def test_closed_step_columns_line_up():
    from supplyline.collect.steps import PHASES, STEP_FIELDS

    c = StepClock()
    fetch(c, T, c.t0, wait=0.25)
    for i, p in enumerate(PHASES):
        if p != "data_wait":
            c.acc[p] = 0.01 * (i + 1)
    c.update(OPT_D)
    fetch(c, T, c.t0 + 1.0)
    assert set(c.steps) == set(STEP_FIELDS)
    assert all(len(v) == 1 for v in c.steps.values())
    assert c.steps["data_wait_s"] == [0.25]
    for i, p in enumerate(PHASES):
        if p != "data_wait":
            assert c.steps[f"{p}_s"] == [0.01 * (i + 1)]
    assert c.steps["batches"] == [1] and c.steps["whatif"] == [0.0]


def test_the_end_of_epoch_fetch_is_waited_for_but_brings_no_batch():
    c = StepClock()
    for epoch in range(2):
        for i in range(4):
            fetch(c, T, epoch * 10.0 + i)
            c.update(OPT_D)
        # the fetch that raises StopIteration: its wait stays in the step, no batch is counted
        counted = c.fetch_begin(T, epoch * 10.0 + 4)
        c.add_fetch(counted, 0.5, 0.0, delivered=False)
    fetch(c, T, 20.0)
    assert c.step_count == 8
    assert c.steps["batches"] == [1] * 8  # not 2 for the step that saw the epoch end
    assert c.steps["data_wait_s"][4] == 0.5 + 0.001  # the step that opened with the epoch end

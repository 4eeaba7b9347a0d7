"""every(): fires on schedule, averages correctly, and reads the device only when it fires."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from supplyline.errors import UserError
from supplyline.fixes import every


class CountHostReads(TorchDispatchMode):
    """Counts `aten._local_scalar_dense`: the op behind .item()/float(t), i.e. the host-device sync."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.reads += 1
        return func(*args, **(kwargs or {}))


def test_reads_the_device_once_per_window_not_once_per_step():
    log_every = every(n_steps=50)
    losses = torch.rand(1000)
    fired = []
    with CountHostReads() as counter:
        for step in range(1000):
            loss = losses[step] * 1.0  # a fresh tensor each step, like a real loss
            if log_every(loss):
                fired.append((step, log_every.mean))
    assert counter.reads == 20  # 1000 steps / 50, not 1000
    assert [step for step, _ in fired] == list(range(49, 1000, 50))
    for window, (_, mean) in enumerate(fired):
        assert mean == pytest.approx(losses[window * 50 : (window + 1) * 50].mean().item(), rel=1e-5)


def test_mean_covers_exactly_the_window_and_keeps_precision_for_half_floats():
    log_every = every(n_steps=4)
    values = [1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 10.0]
    means = [log_every.mean for v in values if log_every(torch.tensor(v, dtype=torch.bfloat16))]
    assert means == [2.5, 10.0]
    assert log_every.values_in_mean == 4


def test_plain_numbers_and_no_value():
    log_every = every(n_steps=2)
    assert not log_every(1)
    assert log_every(3.0) and log_every.mean == 2.0
    ticker = every(n_steps=3)
    assert [ticker() for _ in range(6)] == [False, False, True, False, False, True]
    assert ticker.mean is None


def test_seconds_trigger():
    log_every = every(seconds=0.05)
    assert not log_every(1.0)
    time.sleep(0.06)
    assert log_every(3.0) and log_every.mean == 2.0


@pytest.mark.parametrize(
    "kwargs, message", [({}, "give n_steps="), ({"n_steps": 0}, "at least 1"), ({"seconds": -1}, "must be positive")]
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(UserError, match=message):
        every(**kwargs)

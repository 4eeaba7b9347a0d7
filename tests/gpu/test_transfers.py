"""Host-to-device copies and sync counting, read against CUDA's and PyTorch's real behaviour (CPU seams)."""

from __future__ import annotations

import warnings

import pytest
import torch

from supplyline.collect.cuda_sync import SyncCounter
from supplyline.collect.torch_hooks import classify_copy, non_blocking_requested


@pytest.mark.parametrize(
    ("pinned", "non_blocking", "truly_async", "syncs_stream", "label"),
    [
        (True, True, True, False, "pinned, async"),
        (False, True, False, False, "pageable, non_blocking but not async"),
        (True, False, False, True, "pinned, blocking (syncs the stream)"),
        (False, False, False, True, "pageable, blocking (syncs the stream)"),
    ],
)
def test_classify_copy(pinned: bool, non_blocking: bool, truly_async: bool, syncs_stream: bool, label: str) -> None:
    kind = classify_copy(pinned, non_blocking)
    assert (kind.truly_async, kind.syncs_stream, kind.label) == (truly_async, syncs_stream, label)


def test_non_blocking_follows_each_overload() -> None:
    assert non_blocking_requested(("cuda", torch.float16, True), {})  # to(device, dtype, non_blocking)
    assert not non_blocking_requested(("cuda", torch.float16, False, True), {})  # copy=True is not it
    assert non_blocking_requested((torch.float16, True), {})  # to(dtype, non_blocking)
    other = torch.zeros(1)
    assert not non_blocking_requested((other, False, True), {})  # to(tensor, non_blocking, copy)
    assert non_blocking_requested((other, True), {})
    assert non_blocking_requested((0, True), {}, cuda_method=True)  # cuda(device, non_blocking)
    assert not non_blocking_requested((0,), {}, cuda_method=True)
    assert non_blocking_requested((), {"non_blocking": 1})
    assert not non_blocking_requested(("cuda",), {"non_blocking": False})


def test_sync_counter_sets_the_mode_without_initialising_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    modes: list[int] = []

    def initialises(*a: object) -> None:
        raise AssertionError("torch.cuda.set/get_sync_debug_mode initialise CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", initialises)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", initialises)
    monkeypatch.setattr(torch._C, "_cuda_set_sync_debug_mode", modes.append, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_get_sync_debug_mode", lambda: 0, raising=False)
    before = list(warnings.filters)
    counter = SyncCounter(lambda f: f == __file__)
    assert counter.install()
    try:
        assert modes == [1]
        warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)
    finally:
        counter.uninstall()
    assert modes == [1, 0]
    assert warnings.filters == before  # our "always" filter does not outlive the run
    assert counter.total == 1
    ((t, line),) = counter.points
    assert line.startswith(__file__ + ":") and t > 0

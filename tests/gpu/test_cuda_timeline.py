"""The CUDA glue: on CPU through a fake ``torch`` whose GPU clock the test drives; on a real device
(marked ``gpu``) against a job with a planted data wait."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from supplyline.analyze.gpu_idle import attribute_gpu_idle
from supplyline.collect import cuda_timeline
from supplyline.collect.cuda_timeline import CudaTimeline


class FakeCuda:
    """A GPU whose clock (``gpu_ms``) and progress (``done_ms``) the test sets by hand."""

    def __init__(self, available: bool = True, initialized: bool = True) -> None:
        self.available = available
        self.initialized = initialized
        self.gpu_ms = 0.0  # GPU time given to the next recorded event
        self.done_ms = float("inf")  # events at or before this GPU time have completed
        self.capturing = False
        self.calls: list[str] = []
        self.syncs = 0
        self.created = 0
        self.mode = 1

    def is_available(self) -> bool:
        self.calls.append("is_available")
        return self.available

    def is_initialized(self) -> bool:
        self.calls.append("is_initialized")
        return self.initialized

    def current_device(self) -> int:
        return 0

    def current_stream(self, device: int | None = None) -> str:
        return "stream"

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def synchronize(self, device: int | None = None) -> None:
        self.syncs += 1

    def get_sync_debug_mode(self) -> int:
        return self.mode

    def set_sync_debug_mode(self, mode: int) -> None:
        self.mode = mode

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        self.created += 1
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.t_ms: float | None = None
        self.records = 0

    def record(self, stream: Any = None) -> None:
        self.t_ms = self.cuda.gpu_ms
        self.records += 1

    def query(self) -> bool:
        return self.t_ms is not None and self.t_ms <= self.cuda.done_ms

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.t_ms is not None and end.t_ms is not None and end.query()
        return end.t_ms - self.t_ms


def fake_torch(**kw: Any) -> tuple[Any, FakeCuda]:
    cuda = FakeCuda(**kw)
    return SimpleNamespace(cuda=cuda), cuda


def test_real_cpu_torch_reports_absent_with_a_note() -> None:
    tl = CudaTimeline()
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    tl.on_first_work()
    tl.on_work_queued()
    tl.on_step_boundary(0.0, 0.01)
    snap = tl.snapshot(wait=True)
    assert not snap.available and snap.marks == []
    assert snap.note == "CUDA is not available: GPU idle time was not measured"


def test_without_cuda_the_hooks_touch_nothing() -> None:
    mod, cuda = fake_torch(available=False)
    tl = CudaTimeline(mod)
    cuda.calls.clear()
    for k in range(1000):
        tl.on_first_work()
        tl.on_work_queued()
        tl.on_step_boundary(k, k + 1)
    assert cuda.calls == [] and cuda.created == 0
    assert tl.snapshot().marks == []


def test_never_initialises_cuda_for_the_job() -> None:
    mod, cuda = fake_torch(initialized=False)
    tl = CudaTimeline(mod)
    tl.on_first_work()
    tl.on_work_queued()
    tl.on_step_boundary(0.0, 1.0)
    assert cuda.created == 0 and cuda.syncs == 0
    assert "never initialised CUDA" in tl.snapshot().note


def run_steps(tl: CudaTimeline, cuda: FakeCuda, gpu_times: list[tuple[float, float]], t0: float = 0.0) -> None:
    """One step per (first, done) GPU time in ms; each step's host window is 10 ms."""
    for k, (first, done) in enumerate(gpu_times):
        cuda.gpu_ms = first
        tl.on_first_work()
        cuda.gpu_ms = done
        tl.on_work_queued()
        tl.on_step_boundary(t0 + k * 0.010, t0 + (k + 1) * 0.010)


def test_marks_on_the_host_clock_and_the_sync_kept_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 100.0, *[200.0] * 100])  # the calibration pair reads 100.0 s
    monkeypatch.setattr(cuda_timeline, "_now", lambda: next(clock))
    mod, cuda = fake_torch()
    tl = CudaTimeline(mod)
    # The job's first batch arrives with CUDA initialised: the anchor and the first event both run
    # at GPU time 6 ms, which the calibration pair puts at host 100.0 s.
    run_steps(tl, cuda, [(6.0, 7.0), (16.0, 19.0)], t0=100.0)
    snap = tl.snapshot(t0=100.0)
    assert cuda.mode == 1  # the calibration's synchronize ran with the sync counter's mode restored after
    assert [m.step for m in snap.marks] == [0, 1]
    assert snap.marks[0].first_work_s == pytest.approx(0.0)
    assert snap.marks[0].work_done_s == pytest.approx(0.001)
    assert snap.marks[1].first_work_s == pytest.approx(0.010)
    assert snap.marks[0].work_queued_s == pytest.approx(100.0)
    assert snap.marks[1].end_s == pytest.approx(0.020)
    assert snap.device == 0


def test_events_are_read_only_once_complete_and_reused() -> None:
    mod, cuda = fake_torch()
    tl = CudaTimeline(mod)
    cuda.done_ms = 0.0  # the GPU has done nothing yet: every event stays pending
    run_steps(tl, cuda, [(1.0 + 10 * k, 9.0 + 10 * k) for k in range(5)])
    assert tl.snapshot().marks == [] and tl.snapshot().pending == 5
    cuda.done_ms = 29.0  # steps 0..2 finished
    assert tl.poll() == 3
    assert [m.step for m in tl.marks] == [0, 1, 2]
    created = cuda.created
    run_steps(tl, cuda, [(60.0, 61.0)] * 3)
    assert cuda.created == created  # freed events are reused, not allocated per step
    assert cuda.created <= 2 * 6 + 1  # at most two per step in flight, plus the anchor


def test_first_work_counts_once_per_step_and_the_last_update_wins() -> None:
    mod, cuda = fake_torch()
    tl = CudaTimeline(mod)
    cuda.gpu_ms = 1.0
    tl.on_step_boundary(0.0, 0.0)  # a step closes before CUDA work: opens step 1's provisional event
    cuda.gpu_ms = 2.0
    tl.on_first_work()  # the batch arrives: re-records the same event
    cuda.gpu_ms = 3.0
    tl.on_first_work()  # a second fetch (gradient accumulation): ignored
    for t in (5.0, 7.0):  # two optimizers step: the last one marks the end of the step's work
        cuda.gpu_ms = t
        tl.on_work_queued()
    tl.on_step_boundary(0.0, 0.010)
    mark = tl.snapshot().marks[-1]
    assert (mark.first_work_s - tl.alignment.host_s) * 1000 == pytest.approx(1.0)
    assert (mark.work_done_s - tl.alignment.host_s) * 1000 == pytest.approx(6.0)


def test_no_recording_while_a_cuda_graph_is_captured() -> None:
    mod, cuda = fake_torch()
    tl = CudaTimeline(mod)
    tl.on_step_boundary(0.0, 0.0)
    cuda.capturing = True
    tl.on_work_queued()
    assert tl._open.done is None


def test_an_error_stops_the_timeline_with_a_note_and_never_raises() -> None:
    mod, cuda = fake_torch()

    def broken(enable_timing: bool = False) -> None:
        raise RuntimeError("CUDA error: an illegal memory access\nmore")

    tl = CudaTimeline(mod)
    tl.on_step_boundary(0.0, 0.0)
    cuda.Event = broken  # type: ignore[method-assign]
    tl.on_step_boundary(0.0, 0.01)
    tl.on_work_queued()
    snap = tl.snapshot(wait=True)
    assert not snap.available
    assert snap.note == "CUDA timeline stopped: RuntimeError: CUDA error: an illegal memory access"


def test_a_gpu_far_behind_is_not_followed_beyond_the_cap() -> None:
    mod, cuda = fake_torch()
    cuda.done_ms = -1.0
    tl = CudaTimeline(mod)
    run_steps(tl, cuda, [(1.0, 2.0)] * (cuda_timeline.MAX_IN_FLIGHT + 5))
    snap = tl.snapshot()
    assert snap.pending == cuda_timeline.MAX_IN_FLIGHT
    assert "5 step(s) not followed" in snap.note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_gpu_idle_matches_a_planted_host_wait() -> None:
    # Each step: sleep 5 ms (the "data wait"), ~2 ms of matmuls, then .item(): the GPU idles ~5 ms.
    a = torch.randn(2048, 2048, device="cuda")
    tl = CudaTimeline()
    t_prev = time.perf_counter()
    waits = []
    for _ in range(30):
        w0 = time.perf_counter()
        time.sleep(0.005)
        waits.append((w0, time.perf_counter()))
        tl.on_first_work()
        (a @ a).sum().item()
        tl.on_work_queued()
        now = time.perf_counter()
        tl.on_step_boundary(t_prev, now)
        t_prev = now
    snap = tl.snapshot(wait=True)
    from supplyline.analyze.gpu_idle import HostInterval

    res = attribute_gpu_idle(snap.marks, [HostInterval("data_wait", a, b) for a, b in waits], warmup_steps=2)
    assert snap.available and res.idle_share is not None
    host_share = res.host_phase_s["data_wait"] / res.wall_s
    assert res.by_phase.get("data_wait", 0.0) / res.wall_s == pytest.approx(host_share, abs=0.05)

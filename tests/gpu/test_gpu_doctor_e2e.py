"""The whole GPU idle path on CPU: a real DoctorSession around a real (CPU) training loop, with the
CUDA timeline over a fake ``torch.cuda`` whose GPU runs in lockstep with the host (every event
completes the moment it is recorded: a job that syncs each step). Record -> JSON -> report -> console."""

from __future__ import annotations

import io
import json
import time

import torch
from rich.console import Console
from test_cuda_timeline import FakeCuda, FakeEvent, fake_torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from supplyline import phases as P
from supplyline.analyze.report import build_report
from supplyline.collect.cuda_timeline import CudaTimeline
from supplyline.doctor.options import DoctorOptions
from supplyline.doctor.session import DoctorSession
from supplyline.launch import Outcome
from supplyline.record import RunRecord, TargetInfo
from supplyline.render.console import render_summary


class HostClockEvent(FakeEvent):
    """Recorded at the host's present: the GPU has no queue, it is where the host is."""

    def record(self, stream: object = None) -> None:
        self.t_ms = time.perf_counter() * 1e3
        self.records += 1


class HostClockCuda(FakeCuda):
    def Event(self, enable_timing: bool = False) -> HostClockEvent:
        self.created += 1
        return HostClockEvent(self)


class SlowData(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.006)  # a starved loader: num_workers=0 and 6 ms per sample
        return torch.randn(8)


def run_session(tmp_path: object, timeline: CudaTimeline) -> RunRecord:
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    options = DoctorOptions(what_if=False)
    session = DoctorSession(TargetInfo("library", "train.py", [], "."), str(tmp_path), options, timeline=timeline)
    session.start()
    try:
        for k, x in enumerate(DataLoader(SlowData(), batch_size=1)):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            if k == 15:
                break
    finally:
        rec = session.stop(Outcome(0, "completed"))
    return rec


def test_session_records_the_gpu_timeline_and_the_report_says_input_on_the_gpu(tmp_path) -> None:
    mod, _ = fake_torch()
    mod.cuda = HostClockCuda()
    rec = run_session(tmp_path, CudaTimeline(mod))
    tl = rec.gpu_timeline
    assert tl is not None and tl.available, tl
    assert len(tl.marks) >= 14 and all(m.first_work_s is not None for m in tl.marks)
    assert {iv.phase for iv in tl.intervals} >= {P.DATA_WAIT, P.COMPUTE}
    # Marks and intervals are on the step clock, like the step columns.
    assert abs(tl.marks[3].start_s - rec.steps["start_s"][3]) < 1e-9
    assert mod.cuda.syncs >= 2  # the calibration and the one at stop; never one per step

    back = RunRecord.from_dict(json.loads(json.dumps(rec.to_dict())))  # typed load of the saved form
    report = build_report(back)
    d = report.to_dict()
    g = d["gpu_idle"]
    assert g["idle_share"] > 0.5 and g["by_phase_share"][P.DATA_WAIT] > 0.5
    assert d["phase_share"][P.GPU_IDLE] == g["idle_share"]
    assert report.verdict.bound == "input" and "the GPU sat idle" in report.verdict.sentence

    buf = io.StringIO()
    render_summary(report, None, Console(file=buf, width=160, color_system=None))
    out = buf.getvalue()  # the one screen: GPU idle in one line under the step bar
    assert "of the time (CUDA events)" in out and "waiting for data wait" in out
    buf = io.StringIO()
    render_summary(report, None, Console(file=buf, width=160, color_system=None), details=True)
    out = buf.getvalue()
    assert "GPU idle (CUDA events" in out and "waiting for data wait" in out


def test_on_cpu_the_session_keeps_a_note_and_nothing_else(tmp_path) -> None:
    if torch.cuda.is_available():
        import pytest

        pytest.skip("this machine has CUDA")
    rec = run_session(tmp_path, None)  # type: ignore[arg-type]
    assert rec.gpu_timeline is not None and not rec.gpu_timeline.available
    assert rec.gpu_timeline.note == "CUDA is not available: GPU idle time was not measured"
    assert rec.gpu_timeline.marks == [] and rec.gpu_timeline.intervals == []
    d = build_report(rec).to_dict()
    assert "gpu_idle" not in d and P.GPU_IDLE not in d["phase_share"]
    assert not any("GPU idle" in n for n in d["notes"])


def test_step_clock_keeps_intervals_only_when_asked() -> None:
    from supplyline.collect.steps import StepClock

    clock = StepClock()
    clock.leave(P.LOGGING, clock.enter(P.LOGGING))
    clock.add_fetch(True, 0.001, 0.0, 5.0)
    assert clock.intervals is None
    clock.keep_intervals()
    t = clock.enter(P.LOGGING)
    clock.leave(P.LOGGING, t)
    nested = clock.enter(P.LOGGING)
    clock.leave(P.LOGGING, nested)
    clock.add_fetch(True, 0.002, 0.0, 5.0)
    clock.add_fetch(True, 0.002, 0.0)  # a nested fetch (inside another phase): no interval of its own
    assert clock.intervals is not None and len(clock.intervals) == 3
    assert clock.intervals[0][0] == P.LOGGING and clock.intervals[0][1] == t and clock.intervals[0][2] >= t
    assert clock.intervals[2] == (P.DATA_WAIT, 5.0, 5.002)

"""GPU idle attribution on hand-built timelines (all times written in ms, passed in seconds)."""

from __future__ import annotations

import pytest

from supplyline.analyze.gpu_idle import (
    ClockAlignment,
    HostInterval,
    StepGpuMarks,
    SyncPoint,
    attribute_gpu_idle,
)


def ms(x: float) -> float:
    return x / 1000.0


def iv(phase: str, a: float, b: float) -> HostInterval:
    return HostInterval(phase, ms(a), ms(b))


def mark(step: int, start: float, end: float, first: float | None, done: float | None, queued: float | None = None):
    return StepGpuMarks(
        step,
        ms(start),
        ms(end),
        None if first is None else ms(first),
        None if done is None else ms(done),
        None if queued is None else ms(queued),
    )


def approx_ms(x: float) -> object:
    return pytest.approx(ms(x), abs=1e-9)


def test_cpu_ahead_gpu_never_idle_though_cpu_waits_for_data() -> None:
    # Host: 10 ms steps, the first 6 ms of each waiting for data, then 4 ms of launches; no sync.
    # GPU: 10 ms of work per step, started as soon as the first batch was there: always busy.
    marks = [mark(k, 10 * k, 10 * k + 10, 6 + 10 * k, 16 + 10 * k, queued=10 * k + 10) for k in range(8)]
    waits = [iv("data_wait", 10 * k, 10 * k + 6) for k in range(8)]
    res = attribute_gpu_idle(marks, waits, warmup_steps=1)  # the first step is warm-up, as in the doctor
    assert res.idle_s == pytest.approx(0.0, abs=1e-12)
    assert res.idle_share == pytest.approx(0.0, abs=1e-9)
    assert res.host_phase_s["data_wait"] == approx_ms(6 * 7)  # the CPU did wait, 60% of the time
    assert res.cpu_ahead_s_median == approx_ms(6)
    assert [s.step for s in res.steps] == list(range(1, 8))
    assert all(s.dry_phase is None for s in res.steps[:-1])  # the GPU ran dry in no step's window


def test_leaving_out_the_warm_up_marks_would_call_its_kernels_idle() -> None:
    # Why warmup_steps exists: without step 0's busy run, window 1 looks idle until 16.
    marks = [mark(k, 10 * k, 10 * k + 10, 6 + 10 * k, 16 + 10 * k, queued=10 * k + 10) for k in range(3)]
    assert attribute_gpu_idle(marks[1:]).steps[0].idle_s == approx_ms(6)
    assert attribute_gpu_idle(marks, warmup_steps=1).steps[0].idle_s == approx_ms(0)


def test_first_step_idle_is_its_data_wait() -> None:
    marks = [mark(k, 10 * k, 10 * k + 10, 6 + 10 * k, 16 + 10 * k, queued=10 * k + 10) for k in range(3)]
    res = attribute_gpu_idle(marks, [iv("data_wait", 0, 6)])
    assert res.steps[0].idle_s == approx_ms(6)
    assert res.steps[0].by_phase == {"data_wait": approx_ms(6)}


def test_synced_starved_idle_equals_data_wait() -> None:
    # Each step: 6 ms data wait, 1 ms transfer, launches, then .item(): the host waits for the GPU,
    # which finishes right at the step's end. The GPU idles exactly while the host fetches.
    marks, ivs, syncs = [], [], []
    for k in range(5):
        t = 10 * k
        marks.append(mark(k, t, t + 10, t + 6, t + 10, queued=t + 7.5))
        ivs += [iv("data_wait", t, t + 6), iv("transfer", t + 6, t + 7)]
        syncs.append(SyncPoint(ms(t + 8), "train.py:40"))
    res = attribute_gpu_idle(marks, ivs, syncs)
    assert res.idle_s == approx_ms(30)
    assert res.idle_share == pytest.approx(0.6)
    assert res.by_phase == {"data_wait": approx_ms(30)}
    assert res.host_phase_s["data_wait"] == approx_ms(30)


def test_logging_stall_counts_only_what_run_ahead_did_not_hide() -> None:
    # 15 ms steps: 1 ms data wait, launches until 4, GPU finishes the step's work at 8 while the host
    # logs from 5 to 14 (9 ms on the CPU, only 6 of them with the GPU idle), 1 ms of other work.
    marks, ivs = [], []
    for k in range(4):
        t = 15 * k
        marks.append(mark(k, t, t + 15, t + 1, t + 8, queued=t + 4))
        ivs += [iv("data_wait", t, t + 1), iv("logging", t + 5, t + 14)]
    res = attribute_gpu_idle(marks, ivs)
    step = res.steps[1]
    assert step.dry_phase == "logging"
    assert step.by_phase["logging"] == approx_ms(6)
    assert step.by_phase["other"] == approx_ms(1)
    assert step.by_phase["data_wait"] == approx_ms(1)
    assert res.host_phase_s["logging"] == approx_ms(36)
    assert res.by_phase["logging"] == approx_ms(24)
    assert res.steps[0].cpu_ahead_s == approx_ms(4)


def test_checkpoint_stall() -> None:
    # A synchronous checkpoint every other step: 20 ms on the host after the GPU finished.
    marks, ivs = [], []
    t = 0.0
    for k in range(4):
        length = 30 if k % 2 else 10
        marks.append(mark(k, t, t + length, t + 1, t + 7, queued=t + 5))
        ivs.append(iv("data_wait", t, t + 1))
        if k % 2:
            ivs.append(iv("checkpoint", t + 8, t + 28))
        t += length
    res = attribute_gpu_idle(marks, ivs)
    assert [s.dry_phase for s in res.steps] == ["other", "other", "other", "other"]
    assert res.by_phase["checkpoint"] == approx_ms(40)
    assert res.steps[1].by_phase["checkpoint"] == approx_ms(20)
    assert "checkpoint" not in res.steps[0].by_phase


def test_checkpoint_running_when_gpu_ran_dry_is_the_dry_phase() -> None:
    marks = [mark(0, 0, 30, 1, 9, queued=5), mark(1, 30, 40, 31, 39, queued=35)]
    res = attribute_gpu_idle(marks, [iv("checkpoint", 6, 28)])
    assert res.steps[0].dry_phase == "checkpoint"
    assert res.steps[0].by_phase["checkpoint"] == approx_ms(19)


def test_idle_after_a_sync_goes_to_its_line() -> None:
    # .item() at 5: the host waits until the GPU is done at 8, then spends 4 ms in unhooked Python.
    marks = [mark(0, 0, 12, 1, 8, queued=4), mark(1, 12, 24, 13, 20, queued=16)]
    ivs = [iv("data_wait", 0, 1), iv("data_wait", 12, 13)]
    res = attribute_gpu_idle(marks, ivs, [SyncPoint(ms(5), "train.py:51"), SyncPoint(ms(17), "train.py:51")])
    assert res.steps[0].sync_line == "train.py:51"
    assert res.steps[0].by_phase == {"data_wait": approx_ms(1), "sync": approx_ms(4)}
    assert res.sync_lines["train.py:51"] == approx_ms(8)


def test_sync_followed_by_a_hooked_phase_is_not_the_cause() -> None:
    # The sync at 2 returned before the host started logging at 3; the GPU ran dry at 8, in "other".
    marks = [mark(0, 0, 12, 1, 8, queued=4)]
    res = attribute_gpu_idle(marks, [iv("logging", 3, 6)], [SyncPoint(ms(2), "train.py:9")])
    assert res.steps[0].sync_line is None
    assert res.steps[0].by_phase == {"other": approx_ms(5)}


def test_idle_stretch_across_a_step_boundary_is_split_between_the_steps() -> None:
    marks = [mark(0, 0, 10, 0, 6, queued=3), mark(1, 10, 20, 14, 20, queued=16)]
    ivs = [iv("logging", 7, 10), iv("data_wait", 10, 14)]
    res = attribute_gpu_idle(marks, ivs)
    assert res.steps[0].idle_s == approx_ms(4)
    assert res.steps[1].idle_s == approx_ms(4)
    assert res.steps[1].by_phase == {"data_wait": approx_ms(4)}
    assert res.idle_s == approx_ms(8)


def test_event_not_complete_leaves_its_step_out_and_counts_its_work_as_busy() -> None:
    # Step 1's done event is pending: its work was queued, so none of its window is called idle.
    marks = [mark(0, 0, 10, 2, 9, queued=5), mark(1, 10, 20, 11, None, queued=15), mark(2, 20, 30, None, None)]
    res = attribute_gpu_idle(marks, [iv("data_wait", 0, 2)])
    assert [s.step for s in res.steps] == [0]
    assert res.steps_pending == 2
    assert "2 step(s) left out" in res.note
    assert res.idle_s == approx_ms(3)  # 0..2 waiting for data, 9..10 after the work
    assert res.wall_s == approx_ms(10)


def test_constant_clock_offset_changes_nothing() -> None:
    base = [mark(k, 10 * k, 10 * k + 10, 10 * k + 4, 10 * k + 9, queued=10 * k + 6) for k in range(4)]
    ivs = [iv("data_wait", 10 * k, 10 * k + 4) for k in range(4)]
    shift = 1234.5
    moved = [
        mark(k, 10 * k + shift, 10 * k + 10 + shift, 10 * k + 4 + shift, 10 * k + 9 + shift, 10 * k + 6 + shift)
        for k in range(4)
    ]
    moved_ivs = [iv("data_wait", 10 * k + shift, 10 * k + 4 + shift) for k in range(4)]
    a, b = attribute_gpu_idle(base, ivs), attribute_gpu_idle(moved, moved_ivs)
    assert a.idle_s == pytest.approx(b.idle_s, abs=1e-9)
    assert a.by_phase.keys() == b.by_phase.keys()
    assert a.idle_share == pytest.approx(0.5)


def test_gpu_time_before_the_host_queued_the_work_is_clamped() -> None:
    # Calibration 2 ms off: the GPU seems to finish at 3, before the host queued the work at 5.
    res = attribute_gpu_idle([mark(0, 0, 10, 1, 3, queued=5)])
    assert res.steps[0].idle_s == approx_ms(1 + 5)
    assert res.steps[0].cpu_ahead_s == 0.0


def test_empty_input() -> None:
    res = attribute_gpu_idle([])
    assert res.steps == [] and res.idle_s == 0.0 and res.idle_share is None
    assert res.cpu_ahead_s_median is None
    assert res.note == "no steps with CUDA events"


def test_all_pending() -> None:
    res = attribute_gpu_idle([mark(0, 0, 10, None, None)])
    assert res.idle_share is None and res.steps_pending == 1
    assert res.note == "no step had both CUDA events complete"


def test_clock_alignment() -> None:
    align = ClockAlignment(host_s=100.0)
    assert align.to_host(0.0) == 100.0
    assert align.to_host(250.0) == pytest.approx(100.25)


def test_gpu_side_names_the_host_phase_the_gpu_waited_for() -> None:
    from supplyline.analyze.gpu_idle import gpu_side

    starved = [mark(k, 10 * k, 10 * k + 10, 10 * k + 6, 10 * k + 10, queued=10 * k + 7) for k in range(4)]
    waits = [iv("data_wait", 10 * k, 10 * k + 6) for k in range(4)]
    assert gpu_side(attribute_gpu_idle(starved, waits)) == "input"
    ahead = [mark(k, 10 * k, 10 * k + 10, 6 + 10 * k, 16 + 10 * k, queued=10 * k + 10) for k in range(8)]
    assert gpu_side(attribute_gpu_idle(ahead, waits, warmup_steps=1)) == "compute"
    assert gpu_side(attribute_gpu_idle([])) == "unknown"

"""On CUDA the verdict and the input/logging/checkpoint findings are judged from GPU idle time
(hand-built CUDA marks), with the CPU-side wait beside it; a CPU record's report is unchanged."""

from __future__ import annotations

import json

from handmade import GpuTimeline, record, save, timeline

from supplyline import phases as P
from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.checks import Evidence, judged_share
from supplyline.analyze.gpu_report import gpu_idle_result
from supplyline.analyze.report import build_report
from supplyline.analyze.supply import supply_signal
from supplyline.record import RunRecord

STEPS, STEP = 20, 0.010


def test_cpu_ahead_waits_for_data_but_the_gpu_is_busy_so_not_input_bound() -> None:
    # The CPU waits 6 of every 10 ms for the DataLoader, but it queued the step's work 6 ms before
    # the GPU finished it: the GPU runs back to back and is never idle.
    tl = timeline(STEPS, STEP, busy=(0.006, 0.016), queued=0.010, phases=[(P.DATA_WAIT, 0.0, 0.006)])
    rep = build_report(record(STEPS, STEP, data_wait=0.006, gpu_timeline=tl))
    assert rep.breakdown.phase_share[P.DATA_WAIT] > 0.55  # what the CPU side alone would call input-bound
    assert rep.gpu_idle is not None and rep.gpu_idle.idle_share is not None
    assert rep.gpu_idle.idle_share < 0.01
    assert rep.verdict.bound == "compute"
    assert "the CPU ran ahead by 6.0 ms" in rep.verdict.sentence and "60%" in rep.verdict.sentence
    assert not [f for f in rep.findings if f.check in ("dataloader", "storage", "preprocessing")]
    assert rep.phase_share[P.GPU_IDLE] < 0.01


def test_synced_starved_is_input_bound_on_the_gpu_too() -> None:
    tl = timeline(STEPS, STEP, busy=(0.006, 0.0095), queued=0.0095, phases=[(P.DATA_WAIT, 0.0, 0.006)])
    rep = build_report(record(STEPS, STEP, data_wait=0.006, gpu_timeline=tl))
    assert rep.verdict.bound == "input"
    assert "the GPU sat idle 60%" in rep.verdict.sentence and "CPU-side: 60%" in rep.verdict.sentence
    first = rep.findings[0]
    assert first.check == "dataloader" and abs(first.share_of_step_time - 0.60) < 0.01
    assert "the GPU sat idle 60% of the time waiting for it (CPU-side: 60%)" in first.evidence
    assert "ran ahead" not in first.evidence  # the two sides agree: no lead to report
    assert abs(rep.phase_share[P.GPU_IDLE] - 0.65) < 0.01  # 6 ms data + 0.5 ms after the update


def test_logging_stall_is_judged_from_gpu_idle() -> None:
    tl = timeline(STEPS, STEP, busy=(0.0, 0.006), queued=0.006, phases=[(P.LOGGING, 0.006, 0.010)])
    rep = build_report(record(STEPS, STEP, logging=0.004, logging_calls=STEPS, gpu_timeline=tl))
    assert rep.verdict.bound == "logging"
    (f,) = [f for f in rep.findings if f.check == "logging"]
    assert abs(f.share_of_step_time - 0.40) < 0.01 and "the GPU sat idle 40%" in f.evidence


def test_checkpoint_stall_is_judged_from_gpu_idle() -> None:
    tl = timeline(STEPS, STEP, busy=(0.0, 0.005), queued=0.005, phases=[(P.CHECKPOINT, 0.005, 0.010)])
    saves = [save(i * STEP + 0.005, 0.005) for i in range(STEPS)]
    rep = build_report(record(STEPS, STEP, checkpoint=0.005, saves=saves, gpu_timeline=tl))
    assert rep.verdict.bound == "checkpoint"
    (f,) = [f for f in rep.findings if f.check == "checkpoint"]
    assert abs(f.share_of_step_time - 0.50) < 0.01 and "the GPU sat idle 50%" in f.evidence


def test_checkpoint_hidden_by_a_cpu_that_ran_ahead_is_no_finding() -> None:
    # The save takes 3 ms of CPU time, but the GPU still has 4 ms of queued work meanwhile.
    tl = timeline(STEPS, STEP, busy=(0.0, 0.010), queued=0.006, phases=[(P.CHECKPOINT, 0.007, 0.010)])
    saves = [save(i * STEP + 0.007, 0.003) for i in range(STEPS)]
    rep = build_report(record(STEPS, STEP, checkpoint=0.003, saves=saves, gpu_timeline=tl))
    assert rep.breakdown.phase_share[P.CHECKPOINT] > 0.25
    assert not [f for f in rep.findings if f.check == "checkpoint"]
    assert rep.verdict.bound == "compute" and "ran ahead by 4.0 ms" in rep.verdict.sentence


def test_judged_share_is_the_cpu_share_without_gpu_marks() -> None:
    rec = record(STEPS, STEP, data_wait=0.006)
    b = breakdown(rec)
    ev = Evidence(rec, b, supply_signal(rec), gpu=gpu_idle_result(rec, b))
    j = judged_share(ev, P.DATA_WAIT)
    assert ev.gpu is None and not j.on_gpu and j.beside == "" and j.share == b.phase_share[P.DATA_WAIT]


def test_a_cpu_record_report_is_unchanged() -> None:
    plain = build_report(record(STEPS, STEP, data_wait=0.006)).to_dict()
    absent = GpuTimeline(available=False, note="CUDA is not available: GPU idle time was not measured")
    rec = record(STEPS, STEP, data_wait=0.006, gpu_timeline=absent)
    rec.host.cuda_available = False  # what a CPU machine's session writes
    assert build_report(rec).to_dict() == plain
    rec.host.cuda_available = True  # CUDA there, but nothing measured: the report says why in a note
    d = build_report(rec).to_dict()
    assert "gpu_idle" not in d and d["notes"] == [*plain["notes"], absent.note]


def test_cpu_report_json_keys_are_as_before() -> None:
    d = build_report(record(STEPS, STEP, data_wait=0.006)).to_dict()
    assert "gpu_idle" not in d and P.GPU_IDLE not in d["phase_share"] and P.GPU_IDLE not in d["phase_ms_per_step"]


def test_the_record_round_trips_its_gpu_timeline() -> None:
    tl = timeline(
        4, STEP, busy=(0.006, 0.0095), queued=0.0095, phases=[(P.DATA_WAIT, 0.0, 0.006)], syncs=[(0.009, "t.py:3")]
    )
    rec = record(4, STEP, data_wait=0.006, gpu_timeline=tl)
    back = RunRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.gpu_timeline == tl
    old = rec.to_dict()
    del old["gpu_timeline"]  # a record written before the field existed
    assert RunRecord.from_dict(old).gpu_timeline is None

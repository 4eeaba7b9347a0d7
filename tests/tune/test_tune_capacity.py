"""The capping model on hand-built numbers."""

from __future__ import annotations

import math

import pytest

from supplyline.analyze.capacity import Pipeline, batch_rate, caps, explain, knee

LADDER = [0, 1, 2, 3, 4, 6, 8, 11, 16]


def cpu_job(**changes: float) -> Pipeline:
    # 10 ms of CPU per batch in a worker, a 5 ms step that burns 3 ms of CPU, 2 cores.
    values = {"cores": 2, "batch_wall_s": 0.010, "batch_cpu_s": 0.010, "step_wall_s": 0.005, "step_cpu_s": 0.003}
    values.update(changes)
    return Pipeline(**values)  # type: ignore[arg-type]


def test_no_workers_take_turns():
    assert batch_rate(cpu_job(), 0) == pytest.approx(1 / 0.015)


def test_cores_cap_a_cpu_bound_loader():
    p = cpu_job()
    assert batch_rate(p, 1) == pytest.approx(100)  # one worker: 10 ms a batch
    assert batch_rate(p, 8) == pytest.approx(2 / 0.013)  # 2 cores over 13 ms of CPU a batch
    assert caps(p, 8)[0].name == "cores"
    assert knee(p, LADDER) == 2
    assert explain(p, LADDER) == "past 2 workers the rate is capped by the 2 cores (the training step uses 0.5 of one)"


def test_other_processes_take_cores():
    busy = cpu_job(other_cores_busy=1.0)
    # two workers and the trainer beside a neighbour's busy core on 2 cores: three quarters of the host
    assert caps(busy, 2)[0].name == "cores" and batch_rate(busy, 2) == pytest.approx(2 * 3 / 4 / 0.013)
    assert "other processes 1.0" in caps(busy, 2)[0].why
    # the host crowded: eight workers win a fair share per thread, 9 of 10 (the neighbour keeps its one)
    assert batch_rate(busy, 8) == pytest.approx(2 * 9 / 10 / 0.013)
    # with room on the host, the neighbour's core is simply not ours
    roomy = cpu_job(other_cores_busy=1.0, cores=8)
    cores_cap = {c.name: c.batches_per_s for c in caps(roomy, 4)}["cores"]
    assert cores_cap == pytest.approx(7 / 0.013)  # 5 threads fit in the 7 cores left
    assert {c.name: c.batches_per_s for c in caps(roomy, 16)}["cores"] == pytest.approx(8 * 17 / 18 / 0.013)


def test_the_handoff_caps_big_batches():
    # 12 MB batches at 0.75 ns a byte: 9 ms to receive each, on a 5 ms step; workers are cheap.
    p = cpu_job(batch_cpu_s=0.001, batch_wall_s=0.020, batch_bytes=12e6, handoff_s_per_byte=0.75e-9, cores=16)
    cap = caps(p, 16)[0]
    assert cap.name == "handoff" and cap.batches_per_s == pytest.approx(1 / 0.014)
    assert "(9.0 ms each" in cap.why and "batches to the trainer" in cap.why
    assert explain(p, LADDER).startswith("past 2 workers the rate is capped by handing 11.4 MiB batches")


def test_workers_that_lose_to_the_training_thread_say_so():
    # Batches made in 4 ms on the training thread, but 9 ms to receive from a worker.
    p = cpu_job(batch_cpu_s=0.001, batch_wall_s=0.004, batch_bytes=12e6, handoff_s_per_byte=0.75e-9, cores=16)
    assert batch_rate(p, 0) > batch_rate(p, 16)
    assert explain(p, LADDER).startswith("more workers do not help: with them the rate is capped by handing")


def test_a_small_handoff_is_the_training_step():
    p = cpu_job(cores=64, batch_bytes=1e5, handoff_s_per_byte=1e-9)
    assert caps(p, 16)[0].name == "trainer"
    assert batch_rate(p, 16) == pytest.approx(1 / 0.0051)


def test_the_disk_caps_reads():
    # 4 MB a batch, a 480 MB/s disk of which others read 80 MB/s: 100 batches/s at most.
    p = cpu_job(
        batch_cpu_s=0.0005,
        batch_wall_s=0.040,
        step_wall_s=0.001,
        step_cpu_s=0.0005,
        cores=4,
        read_bytes_per_batch=4e6,
        disk_bytes_per_s=480e6,
        disk_in_use_bytes_per_s=80e6,
    )
    assert batch_rate(p, 16) == pytest.approx(100)
    assert explain(p, LADDER) == (
        "past 4 workers the rate is capped by the disk at 480 MB/s (80 MB/s of it taken by other reads)"
    )


def test_workers_that_never_saturate_explain_nothing():
    p = cpu_job(batch_cpu_s=0.0001, batch_wall_s=1.0, cores=8)  # sleeping workers: more always helps
    assert caps(p, 16)[0].name == "workers"
    assert explain(p, LADDER) is None


def test_unmeasured_costs_cap_nothing():
    p = Pipeline(cores=2, batch_wall_s=0.01, batch_cpu_s=0.0, step_wall_s=0.0, step_cpu_s=0.0)
    assert math.isinf(caps(p, 4)[-1].batches_per_s)
    assert batch_rate(p, 4) == pytest.approx(400)

"""Every check and its branches on hand-built records (no training run)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from handmade import GpuInfo, SyncLine, TransferStats, WhatIfInfo, line, loader, record, sample, save

from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.checks import (
    CHECKS,
    DatasetCommands,
    Evidence,
    Finding,
    checkpoint_check,
    host_check,
    input_check,
    logging_check,
    run_checks,
    severity,
    transfer_check,
)
from supplyline.analyze.speedup import removal_speedup
from supplyline.analyze.supply import supply_signal
from supplyline.record import RunRecord

NO_COMMANDS = DatasetCommands()


def evidence(rec: RunRecord, snippets=None, commands=NO_COMMANDS) -> Evidence:
    return Evidence(rec, breakdown(rec), supply_signal(rec), commands, snippets)


def test_severity_follows_the_share() -> None:
    assert [severity(s) for s in (0.05, 0.10, 0.29, 0.30)] == ["low", "medium", "medium", "high"]


def test_input_prep_stall_with_no_workers_gives_dataloader_and_preprocessing() -> None:
    rec = record(data_wait=0.008, wait_cpu_ratio=1.0)
    found = input_check(evidence(rec, commands=DatasetCommands("supplyline tune m:ds", "supplyline preprocess m:ds")))
    assert [f.check for f in found] == ["dataloader", "preprocessing"]
    dl = found[0]
    assert dl.severity == "high" and dl.share_of_step_time == pytest.approx(0.8)
    assert "num_workers=2" in dl.fix and "supplyline tune m:ds" in dl.fix
    assert dl.expected_speedup == pytest.approx(2.0)  # see test_speedup: 2 cores shared with a 2 ms step
    assert "supplyline preprocess m:ds" in found[1].fix


def test_input_fetch_stall_with_no_workers_is_storage() -> None:
    rec = record(data_wait=0.008, wait_cpu_ratio=0.05)  # the trainer sleeps while it loads: reads
    (f,) = input_check(evidence(rec))
    assert f.check == "storage" and "fetch stall" in f.evidence and "supplyline pack" in f.fix


def test_busy_workers_on_every_core_is_preprocessing_only() -> None:
    mon = [sample(1000.0 + k * 0.05, worker_cpu=[95.0, 95.0]) for k in range(4)]
    rec = record(data_wait=0.005, loaders=[loader(num_workers=2)], monitor=mon)
    (f,) = input_check(evidence(rec))
    assert f.check == "preprocessing" and f.fix.startswith("All 2 cores are already busy")


def test_idle_workers_are_a_fetch_stall() -> None:
    mon = [sample(1000.0 + k * 0.05, worker_cpu=[5.0, 5.0]) for k in range(4)]
    rec = record(data_wait=0.005, loaders=[loader(num_workers=2)], monitor=mon)
    (f,) = input_check(evidence(rec))
    assert f.check == "storage" and "num_workers=4" in f.fix


def test_no_input_finding_below_the_floor_or_without_a_loader() -> None:
    assert input_check(evidence(record(data_wait=0.0004))) == []
    assert input_check(evidence(record(data_wait=0.008, loaders=[]))) == []


def test_logging_finding_uses_the_snippet_when_given(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = 1\nprint('loss', x)\n")

    class Snippets:
        def logging_fix_snippet(self, code: str) -> str:
            return f"- {code}\n+ for_log(...)"

        def checkpoint_fix_snippet(self, code: str) -> str:
            raise AssertionError("not asked")

    rec = record(logging=0.004, logging_calls=40, line_samples=[line("logging", "user", str(src), 2, 10)])
    (f,) = logging_check(evidence(rec, Snippets()))
    assert f.check == "logging" and f.severity == "high"
    assert "2.0 print/log calls per step" in f.evidence and "train.py:2 `print('loss', x)`" in f.evidence
    assert f.fix == "- print('loss', x)\n+ for_log(...)"
    assert f.expected_speedup == pytest.approx(removal_speedup(0.4))
    (generic,) = logging_check(evidence(rec))
    assert "async_logging" in generic.fix


def test_a_snippet_that_fails_leaves_the_generic_advice() -> None:
    class Broken:
        def logging_fix_snippet(self, code: str) -> str:
            raise ValueError("cannot parse")

        def checkpoint_fix_snippet(self, code: str) -> str:
            raise ValueError("cannot parse")

    (f,) = checkpoint_check(evidence(record(checkpoint=0.005, saves=[save(0.1, 0.005)]), Broken()))
    assert "AsyncCheckpointer" in f.fix


def test_checkpoint_cadence_in_the_evidence() -> None:
    rec = record(steps=20, checkpoint=0.003, saves=[save(k * 0.05, 0.012) for k in range(4)])
    (f,) = checkpoint_check(evidence(rec))
    assert f.evidence.startswith("4 synchronous saves inside training steps, 12 ms each, about every 5 steps")
    assert checkpoint_check(evidence(record(checkpoint=0.0001))) == []


def test_transfer_syncs_only_is_a_low_finding_without_a_gain() -> None:
    gpu = GpuInfo(available=True, syncs=40, sync_lines=[SyncLine("/x/train.py", 12, "main", 40)])
    (f,) = transfer_check(evidence(record(gpu=gpu)))
    assert f.severity == "low" and f.expected_speedup is None and "train.py:12 (40 times)" in f.evidence


def test_transfer_copies_are_described() -> None:
    t = TransferStats(copies=20, bytes=200_000_000, seconds=0.1, pinned=0, pageable=20, non_blocking=0, blocking=20)
    (f,) = transfer_check(evidence(record(transfer=0.003, transfers=t)))
    assert "20 host-to-device copies, 200 MB at 2.0 GB/s; 20 from pageable memory, 20 blocking" in f.evidence
    assert transfer_check(evidence(record())) == []


def test_host_checks() -> None:
    over = record(loaders=[loader(num_workers=4)], torch_threads=2, cpu_count=2)
    assert [f.evidence for f in host_check(evidence(over))] == [
        "4 workers + 2 torch threads on 2 cores: oversubscribed"
    ]
    shm = record(loaders=[loader(num_workers=2, batch_bytes=600 << 20)], shm_free_bytes=1 << 30)
    (f,) = host_check(evidence(shm))
    assert f.severity == "high" and "/dev/shm" in f.evidence
    swap = record(monitor=[sample(1000.0 + k * 0.05, swap=4e6) for k in range(4)])
    assert [f.severity for f in host_check(evidence(swap))] == ["medium"]


def test_run_checks_sorts_by_severity_then_share() -> None:
    rec = record(data_wait=0.0015, logging=0.004, checkpoint=0.0012, saves=[save(0.1, 0.001)])
    found = run_checks(evidence(rec))
    assert [(f.check, f.severity) for f in found][:3] == [
        ("logging", "high"),
        ("dataloader", "medium"),
        ("checkpoint", "medium"),
    ]


def test_a_new_check_is_one_function_in_the_registry() -> None:
    def always(ev: Evidence) -> list[Finding]:
        return [Finding("host", "low", 0.0, f"{ev.breakdown.steps} steps", "nothing", None)]

    found = run_checks(evidence(record()), (*CHECKS, always))
    assert [f.evidence for f in found] == ["19 steps"]


def test_whatif_rates_reach_the_input_gain() -> None:
    w = WhatIfInfo(True, True, "", 10, 10, 0.002, 10, 500.0)
    rec = record(data_wait=0.008, whatif=w, whatif_steps=10)
    assert replace(rec.whatif) == w
    (dl, _) = input_check(evidence(rec))
    assert "what-if: the consumer alone runs a step in 2.0 ms" in dl.evidence


def test_the_contributing_guide_example_check_works() -> None:
    """docs/contributing.md's example: one function, added to the registry."""

    def slow_start_check(ev: Evidence) -> list[Finding]:
        loader, b = ev.supply.loader, ev.breakdown
        first = loader.first_batch_s[0] if loader and loader.first_batch_s else 0.0
        if not b.steps or first < 10 * b.step_s_median:
            return []
        return [
            Finding(
                "dataloader",
                "low",
                0.0,
                f"the first batch took {first:.1f} s",
                "Use persistent_workers=True so workers start once.",
                None,
            )
        ]

    slow = record(loaders=[loader(first_batch_s=[2.5])])
    assert [f.evidence for f in run_checks(evidence(slow), (*CHECKS, slow_start_check))] == [
        "the first batch took 2.5 s"
    ]
    assert run_checks(evidence(record(loaders=[loader(first_batch_s=[0.01])])), (*CHECKS, slow_start_check)) == []

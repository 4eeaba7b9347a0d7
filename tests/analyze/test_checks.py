"""Every check and its branches on hand-built records (no training run)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from handmade import GpuInfo, SyncLine, TransferStats, WhatIfInfo, lib_line, line, loader, record, sample, save

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
from supplyline.analyze.speedup import SNAPSHOT_BYTES_PER_S, removal_speedup
from supplyline.analyze.supply import supply_signal
from supplyline.record import RunRecord

NO_COMMANDS = DatasetCommands()


def evidence(rec: RunRecord, snippets=None, commands=NO_COMMANDS) -> Evidence:
    return Evidence(rec, breakdown(rec), supply_signal(rec), commands, snippets)


def test_severity_follows_the_share() -> None:
    assert [severity(s) for s in (0.05, 0.10, 0.29, 0.30)] == ["low", "medium", "medium", "high"]


def test_input_prep_stall_with_no_workers_is_one_finding_with_both_causes() -> None:
    rec = record(data_wait=0.008, wait_cpu_ratio=1.0)
    found = input_check(evidence(rec, commands=DatasetCommands("supplyline tune m:ds", "supplyline preprocess m:ds")))
    # one wait, one gain: the loader settings and the per-sample CPU are causes inside one finding
    (dl,) = found
    assert dl.check == "dataloader"
    assert dl.severity == "high" and dl.share_of_step_time == pytest.approx(0.8)
    assert [c.split(":")[0] for c in dl.causes] == ["loader settings", "per-sample CPU work"]
    assert "causes: loader settings: num_workers=0" in dl.evidence
    assert "num_workers=2" in dl.fix and "supplyline tune m:ds" in dl.fix
    assert "(1) " in dl.fix and "(2) " in dl.fix and "supplyline preprocess m:ds" in dl.fix
    assert dl.expected_speedup == pytest.approx(2.0)  # see test_speedup: 2 cores shared with a 2 ms step


@pytest.mark.parametrize(("wait", "expected"), [(0.0012, "medium"), (0.0016, "medium"), (0.0045, "high")])
def test_input_severity_follows_the_documented_share(wait: float, expected: str) -> None:
    """12%, 16% and 45% of the step: medium, medium, high (never "low" at 14-16% or "medium" at 45%)."""
    mon = [sample(1000.0 + k * 0.05, worker_cpu=[95.0, 95.0]) for k in range(4)]
    for rec in (record(data_wait=wait), record(data_wait=wait, loaders=[loader(num_workers=2)], monitor=mon)):
        (f,) = input_check(evidence(rec))
        assert f.severity == expected, (f.check, f.share_of_step_time)


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


class FakeSnippets:
    """The snippet module's signatures; records what it was asked."""

    def __init__(self, framework: str = "plain", fail: bool = False) -> None:
        self.framework, self.fail, self.asked = framework, fail, []

    def framework_of(self, frames) -> str:
        return self.framework

    def logging_fix_snippet(self, line: str, frames=()) -> str:
        self.asked.append(("logging", line))
        if self.fail:
            raise ValueError("cannot parse")
        return f"- {line}\n+ for_log(...)"

    def checkpoint_fix_snippet(self, line: str, frames=(), every_steps=None) -> str:
        self.asked.append(("checkpoint", line, list(frames), every_steps))
        if self.fail:
            raise ValueError("cannot parse")
        return f"checkpoint fix for {line.strip()!r} every {every_steps}"

    def save_less_often_snippet(self, line: str, guard: str = "", frames=(), every_steps=None) -> str:
        self.asked.append(("less often", line, guard, list(frames), every_steps))
        if self.fail:
            raise ValueError("cannot parse")
        return f"- {guard.strip()}\n+ every {10 * (every_steps or 50)}"

    def dataloader_fix_snippet(self, frames, num_workers: int, prefetch_factor=None) -> str:
        return f"TrainingArguments(dataloader_num_workers={num_workers})"


def test_logging_finding_uses_the_snippet_when_given(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = 1\nprint('loss', x)\n")
    rec = record(logging=0.004, logging_calls=40, line_samples=[line("logging", "user", str(src), 2, 10)])
    (f,) = logging_check(evidence(rec, FakeSnippets()))
    assert f.check == "logging" and f.severity == "high"
    assert "2.0 print/log calls per step" in f.evidence and "train.py:2 `print('loss', x)`" in f.evidence
    assert f.fix == "- print('loss', x)\n+ for_log(...)"
    assert f.expected_speedup == pytest.approx(removal_speedup(0.4))


def test_print_is_never_told_that_async_logging_fixes_it(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = 1\nprint('loss', x)\nlogger.info('loss %s', x)\n")
    printing = record(logging=0.004, line_samples=[line("logging", "user", str(src), 2, 10)])
    (generic,) = logging_check(evidence(printing))
    assert "async_stdout()" in generic.fix and "async_logging" not in generic.fix
    (real,) = logging_check(evidence(printing, snippets_module()))
    assert "+ async_stdout()" in real.fix and "async_logging" not in real.fix
    logging_line = record(logging=0.004, line_samples=[line("logging", "user", str(src), 3, 10)])
    (f,) = logging_check(evidence(logging_line))
    assert "async_logging" in f.fix


def snippets_module():
    from supplyline.fixes import snippets

    return snippets


def test_a_snippet_that_fails_leaves_the_generic_advice() -> None:
    (f,) = checkpoint_check(evidence(record(checkpoint=0.005, saves=[save(0.1, 0.005)]), FakeSnippets(fail=True)))
    assert "AsyncCheckpointer" in f.fix


def test_checkpoint_cadence_in_the_evidence() -> None:
    rec = record(steps=20, checkpoint=0.003, saves=[save(k * 0.05, 0.012, step=5 * k + 4) for k in range(4)])
    (f,) = checkpoint_check(evidence(rec))
    assert f.evidence.startswith("4 checkpoints, every 5 steps, 12 ms each, written synchronously inside training")
    assert checkpoint_check(evidence(record(checkpoint=0.0001))) == []


def test_saves_that_come_faster_than_they_are_written_promise_no_background_gain() -> None:
    # 14 ms steps of which 12 ms are saves: a 60 ms, 32 MB save every 5 steps leaves 10 ms of steps
    # between saves, too little to hide the write; the copy takes back the little it would gain
    saves = [save(k * 0.07, 0.060, step=5 * k + 4, nbytes=32_000_000) for k in range(4)]
    (f,) = checkpoint_check(evidence(record(steps=20, step_s=0.014, checkpoint=0.012, saves=saves)))
    assert f.expected_speedup is None
    assert f.fix.startswith("No gain expected from saving in the background alone: each checkpoint takes 60 ms")
    assert "the 5 steps between them only 10 ms" in f.fix
    # the same save every 50 steps: the write hides behind the steps, minus the copy
    spaced = [save(k * 0.5, 0.035, step=50 * k + 49, nbytes=32_000_000) for k in range(2)]
    (g,) = checkpoint_check(evidence(record(steps=100, checkpoint=0.035 * 2 / 100, saves=spaced)))
    rest = 0.010 - 0.035 * 2 / 100
    expected = (50 * rest + 0.035) / (50 * rest + 32_000_000 / SNAPSHOT_BYTES_PER_S)
    assert g.expected_speedup == pytest.approx(expected, rel=1e-6)
    assert 1.05 < g.expected_speedup < removal_speedup(g.share_of_step_time)


def test_several_files_saved_together_are_one_checkpoint_and_the_fix_is_for_the_save_line(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("def main():\n    torch.save(model.state_dict(), f'ckpt/{step}.pt')\n    trainer.train()\n")
    saves = []
    for k in range(3):  # model + optimizer in each of steps 9, 19, 29: three checkpoints of two files
        for j, name in enumerate(("model.pt", "optim.pt")):
            saves.append(
                save(
                    k * 0.1 + j * 0.01,
                    0.004,
                    step=10 * k + 9,
                    files=[f"/c/{k}/{name}"],
                    nbytes=50_000_000,
                    caller=f"{src}:2:main",
                    stack=[f"{src}:2:main"],
                )
            )
    snip = FakeSnippets()
    (f,) = checkpoint_check(evidence(record(steps=30, checkpoint=0.003, saves=saves), snip))
    assert f.evidence.startswith("3 checkpoints, every 10 steps, 100 MB each, 8 ms each, 2 files each")
    assert "called from train.py:2 `torch.save(model.state_dict(), f'ckpt/{step}.pt')`" in f.evidence
    (asked,) = snip.asked
    # 100 MB every 10 short steps: the snapshot costs more than a background write saves, so the
    # change asked for is the cadence, written for the save line
    assert f.expected_speedup is None
    assert asked == ("less often", "    torch.save(model.state_dict(), f'ckpt/{step}.pt')", "", [f"{src}:2:main"], 10)


def test_a_trainer_checkpoint_is_never_fixed_by_rewriting_the_users_train_call(tmp_path) -> None:
    user = tmp_path / "train.py"
    user.write_text("def main():\n    out = trainer.train()\n")
    lib = tmp_path / "transformers" / "trainer.py"
    lib.parent.mkdir()
    lib.write_text("x = 1\n        self._save_checkpoint(model, trial)\n")
    stack = [f"{lib}:2:_inner_training_loop", f"{user}:2:main"]
    saves = [
        save(
            k * 0.1,
            0.05,
            step=5 * k + 4,
            caller=f"{lib}:2:_inner_training_loop",
            user_caller=f"{user}:2:main",
            stack=stack,
            kind="hf.trainer_checkpoint",
        )
        for k in range(4)
    ]
    rec = record(steps=20, checkpoint=0.004, saves=saves)
    (f,) = checkpoint_check(evidence(rec, snippets_module()))
    assert f.evidence.startswith("4 checkpoints, every 5 steps")
    assert "called from train.py:2 `out = trainer.train()`" in f.evidence
    assert "save_steps=500" in f.fix and "TrainingArguments(" in f.fix
    assert "trainer.train()" not in f.fix and "- " not in f.fix


def test_a_framework_job_gets_the_dataloader_fix_in_the_frameworks_terms() -> None:
    trainer_stack = ["/site-packages/transformers/trainer.py:2300:_inner_training_loop", "/x/train.py:40:main"]
    rec = record(data_wait=0.006, loaders=[loader(iter_stack=trainer_stack)])
    (f,) = input_check(evidence(rec, snippets_module()))
    assert "dataloader_num_workers=2" in f.fix and "TrainingArguments(" in f.fix
    plain = record(data_wait=0.006, loaders=[loader(iter_stack=["/x/train.py:40:main"])])
    (p,) = input_check(evidence(plain, snippets_module()))
    assert "DataLoader(..., num_workers=2" in p.fix and "TrainingArguments" not in p.fix


def test_data_wait_lines_name_the_library_function_under_the_users_line(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = 1\n        img = self.blur(img)\n    for x, y in loader:\n")
    pil = "/usr/lib/python3/site-packages/PIL/Image.py:2100:filter"
    samples = [
        lib_line(str(src), 2, 30, library=pil, function="__call__"),
        lib_line(str(src), 2, 10, library=pil, function="__getitem__"),  # same line, same library: one row
        lib_line(str(src), 3, 60),  # the `for` line: the DataLoader's own machinery
    ]
    rec = record(
        data_wait=0.008, wait_cpu_ratio=1.0, line_samples=samples, loaders=[loader(iter_stack=[f"{src}:3:main"])]
    )
    b = breakdown(rec)
    assert [(x.line, x.library) for x in b.data_wait_lines] == [(3, ""), (2, pil)]
    assert b.data_wait_lines[1].share_of_step_time == pytest.approx(0.4)
    (f,) = input_check(evidence(rec))
    assert "most at train.py:2 `img = self.blur(img)` → PIL/Image.py:filter (40% of step time)" in f.evidence
    assert f.evidence.count("train.py:2") == 1
    assert "per-sample CPU work: the loading is CPU work (prep stall), most at train.py:2" in f.evidence


def test_a_data_wait_line_from_a_handful_of_samples_is_named_without_a_share(tmp_path) -> None:
    src = tmp_path / "train.py"
    src.write_text("x = 1\n        img = self.blur(img)\n    for x, y in loader:\n")
    pil = "/usr/lib/python3/site-packages/PIL/Image.py:2100:filter"
    samples = [lib_line(str(src), 2, 2, library=pil, function="__call__"), lib_line(str(src), 3, 5)]
    rec = record(
        data_wait=0.008, wait_cpu_ratio=1.0, line_samples=samples, loaders=[loader(iter_stack=[f"{src}:3:main"])]
    )
    (f,) = input_check(evidence(rec))
    assert "most at train.py:2 `img = self.blur(img)` → PIL/Image.py:filter (2 of 7 samples: too few" in f.evidence
    assert "% of step time)" not in f.evidence.split("most at")[1]


def test_cores_other_processes_take_shrink_the_promised_gain() -> None:
    # num_workers=0, 8 ms of a 10 ms step loading on the training thread, 2 cores
    def rec(busy_pct: float) -> RunRecord:
        window = [sample(1000.0 + t / 10, busy_pct=busy_pct) for t in range(3)]  # the trainer: 95% of a core
        return record(data_wait=0.008, wait_cpu_ratio=1.0, monitor=window, loaders=[loader()])

    quiet, crowded = rec(50.0), rec(100.0)
    assert supply_signal(quiet).other_cores_busy == pytest.approx(0.05)
    assert supply_signal(crowded).other_cores_busy == pytest.approx(1.05)
    (q,) = input_check(evidence(quiet))
    (c,) = input_check(evidence(crowded))
    assert q.expected_speedup and c.expected_speedup and c.expected_speedup < q.expected_speedup
    assert "other processes 1.1" in c.fix


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
    (dl,) = input_check(evidence(rec))
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


def test_workers_missed_in_the_observed_window_are_judged_from_the_rest_of_the_run() -> None:
    # the only sample inside the steps saw the trainer alone; one taken later saw two busy workers
    window = [sample(1000.1), sample(1002.0, worker_cpu=[95.0, 95.0])]
    rec = record(data_wait=0.008, monitor=window, loaders=[loader(num_workers=2)])
    sig = supply_signal(rec)
    assert sig.stall == "prep" and "2 workers averaged 95% of a core each" in sig.evidence


def _with_root_cpu(rec: RunRecord, pct: float) -> RunRecord:
    rec.monitor.samples = [sample(1000.0 + t / 10) for t in range(3)]  # inside the observed steps
    samples = [
        replace(s, processes=[replace(s.processes[0], cpu_pct=pct), *s.processes[1:]]) for s in rec.monitor.samples
    ]
    rec.monitor.samples = samples
    return rec


def test_workers_that_would_take_cores_from_the_models_threads_are_not_promised_a_gain() -> None:
    # dcgan's case: a 7 ms step on both cores (intra-op threads) beside 3 ms of loading on the
    # training thread; a worker takes a core from the step, which then runs as on one (14 ms).
    busy = _with_root_cpu(record(data_wait=0.003, wait_cpu_ratio=1.0), 195.0)
    sig = supply_signal(busy)
    assert sig.intra_op_cores is not None and sig.intra_op_cores >= 0.5
    (dl,) = input_check(evidence(busy))
    assert dl.expected_speedup is None
    assert "No gain promised from more workers" in dl.fix and "intra-op threads" in dl.fix
    assert "torch.set_num_threads(" in dl.fix
    # The same job whose process stays on one core is promised its gain.
    alone = _with_root_cpu(record(data_wait=0.003, wait_cpu_ratio=1.0), 95.0)
    (dl,) = input_check(evidence(alone))
    assert dl.expected_speedup is not None and "No gain promised" not in dl.fix


def test_saves_too_close_for_a_background_writer_get_a_cadence_change_not_an_async_diff(tmp_path) -> None:
    from supplyline.analyze.next_step import split_fix
    from supplyline.fixes import snippets

    src = tmp_path / "train.py"
    src.write_text("for step in range(100):\n    if step % 5 == 4:\n        torch.save(model.state_dict(), 'c.pt')\n")
    saves = [
        save(
            k * 0.07, 0.060, step=5 * k + 4, nbytes=32_000_000, caller=f"{src}:3:<module>", stack=[f"{src}:3:<module>"]
        )
        for k in range(4)
    ]
    (f,) = checkpoint_check(evidence(record(steps=20, step_s=0.014, checkpoint=0.012, saves=saves), snippets))
    assert f.expected_speedup is None and "AsyncCheckpointer" not in f.fix
    do, change = split_fix(f.fix)
    # the sentence ends before the diff (no "# once, before the training loop" glued to it)
    assert do.startswith("No gain expected from saving in the background alone") and "#" not in do
    assert change == [
        "# save every 50 steps instead of every 5:",
        "-     if step % 5 == 4:",
        "+     if step % 50 == 4:",
    ]


def test_a_background_save_the_trial_measured_slower_becomes_a_cadence_change() -> None:
    from supplyline.collect.events import TrialRecord
    from supplyline.fixes import snippets

    saves = [save(k * 0.5, 0.035, step=50 * k + 49, nbytes=1_000_000) for k in range(2)]
    rec = record(steps=100, checkpoint=0.035 * 2 / 100, saves=saves)
    (promised,) = checkpoint_check(evidence(rec, snippets))
    assert promised.expected_speedup and "AsyncCheckpointer" in promised.fix
    rec.trials.trials.append(TrialRecord("checkpoint", {}, promised.expected_speedup, 10.0, 9.0, 0.9, [0.85, 0.95]))
    (f,) = checkpoint_check(evidence(rec, snippets))
    assert f.fix.startswith("No gain measured from saving in the background: the doctor's trial did it on this job")
    assert "0.90× (0.85–0.95) (slower)" in f.fix and "AsyncCheckpointer" not in f.fix
    assert f.expected_speedup == promised.expected_speedup  # the model's estimate stays, beside the trial


def test_the_check_table_names_every_finding_once() -> None:
    import typing

    from supplyline.analyze.checks import CHECK_PHASE, CHECK_SPECS, INPUT_CHECKS, CheckName

    names = [s.name for s in CHECK_SPECS]
    assert sorted(names) == sorted(typing.get_args(CheckName)) and len(set(names)) == len(names)
    assert INPUT_CHECKS == {"dataloader", "storage", "preprocessing"}
    assert CHECK_PHASE["storage"] == "data_wait" and "host" not in CHECK_PHASE

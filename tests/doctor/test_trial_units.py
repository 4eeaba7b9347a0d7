"""Fix-trial bookkeeping on hand-built numbers: rates, spread, A/B alternation, the plan, the report."""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

from supplyline.analyze.checks import MIN_PROMISE, _promise
from supplyline.analyze.report import build_report
from supplyline.apply.writes import AsyncStream
from supplyline.collect.events import SaveEvent, TrialRecord, TrialsInfo
from supplyline.doctor import trial_stats as ts
from supplyline.doctor.trials import PlannedTrial, TrialRunner, plan_trials, save_period, worker_candidates
from supplyline.record import load_record

OLD_RECORD = "tests/analyze/fixtures/record_v1_demo.json"


def test_segment_rate_leaves_the_first_step_out():
    assert ts.segment_rate([5.0, 0.1, 0.1, 0.1, 0.1]) == pytest.approx(10.0)
    assert ts.segment_rate([5.0, 0.1]) is None  # one rated step is no rate
    assert ts.rate([]) is None


def test_a_new_loaders_stretch_leaves_out_what_its_queues_held():
    # 2 workers x prefetch 2: up to 4 batches made during the start-up, taken without a wait
    durations = [1.0, 0.001, 0.001, 0.001] + [0.1] * 6
    assert ts.loader_skip({"num_workers": 2, "prefetch_factor": 2}) == 4
    assert ts.loader_skip({"num_workers": 2}) == 4  # torch's default prefetch_factor
    assert ts.loader_skip({"num_workers": 8, "prefetch_factor": 4}) == 32 and ts.loader_skip({}) == 1
    assert ts.segment_rate(durations, 4) == pytest.approx(10.0)
    assert ts.segment_rate(durations) == pytest.approx(9 / 0.603)  # only the first left out: 1.5x too fast


def test_ab_schedule_alternates_and_keeps_a_rated_minimum():
    assert ts.ab_schedule(40) == [("A", 10), ("B", 10), ("A", 10), ("B", 10)]
    assert [n for _, n in ts.ab_schedule(4)] == [3, 3, 3, 3]


def test_ab_schedule_in_whole_save_periods_after_a_lead():
    # saves every 5 steps: 30 steps would be 7-step stretches holding one or two saves by chance
    # 30 steps: 7 a stretch, rounded up to three saves each (the first, and two of the writer's steady state)
    assert ts.ab_schedule(30, period=5, lead=2) == [("lead", 2), ("A", 15), ("B", 15), ("A", 15), ("B", 15)]
    assert ts.ab_schedule(12, period=5) == [("A", 5), ("B", 5), ("A", 5), ("B", 5)]  # three do not fit in 12
    assert ts.ab_schedule(80, period=5) == [("A", 20), ("B", 20), ("A", 20), ("B", 20)]
    assert ts.ab_schedule(8, period=1) == [("A", 3), ("B", 3), ("A", 3), ("B", 3)]  # the rated minimum
    assert ts.ab_schedule(30, period=24) == [("A", 24), ("B", 24), ("A", 24), ("B", 24)]


def test_save_period_reads_a_regular_cadence_only():
    def saves(*steps: int) -> list[SaveEvent]:
        return [SaveEvent("torch.save", k * 1.0, 0.01, "c.pt", True, step=k) for k in steps]

    assert save_period(saves(4, 9, 14, 19)) == (5, 19)
    assert save_period(saves(4, 9, 15)) == (None, 0)  # by time, not by step
    assert save_period(saves(4)) == (None, 0)


def test_checkpoint_stretches_start_right_after_a_save_and_hold_one_each():
    info = TrialsInfo(enabled=True, steps_requested=20)
    runner = TrialRunner(info, lambda line: None)
    # saves every 5 steps, the last in step 37; the trial starts at step 40: 3 lead steps (40-42, a save in 42)
    plan = PlannedTrial("checkpoint", 2.0, period=5, last_save=37)
    assert runner.begin([plan], None, first_step=40)
    assert [(s.label, s.steps) for s in runner.segments] == [("lead", 3), ("A", 15), ("B", 15), ("A", 15), ("B", 15)]
    starts = list(itertools.accumulate([40] + [s.steps for s in runner.segments]))[1:-1]
    assert all((start - 38) % 5 == 0 for start in starts)  # each right after a save step (37 + 5k)
    done = False
    while not done:
        done = runner.on_step(0.01)
    (trial,) = info.trials
    # the lead is not a result; a periodic trial decides on three pairs at least (MIN_PERIODIC_PAIRS)
    assert [s.label for s in trial.segments] == ["A", "B"] * 3


def test_alternating_pools_rates_and_cancels_drift():
    # The machine slows down 2x half way; the fix halves the step throughout.
    segs = [
        ("A", [1.0] + [0.010] * 4),
        ("B", [1.0] + [0.005] * 4),
        ("A", [1.0] + [0.020] * 4),
        ("B", [1.0] + [0.010] * 4),
    ]
    m = ts.alternating(segs)
    assert m.baseline_steps_per_s == pytest.approx(8 / 0.12)
    assert m.trial_steps_per_s == pytest.approx(8 / 0.06)
    assert m.speedup == pytest.approx(2.0)
    # Each B is paired with the A run just before it: the drift cancels, and so does the doubt.
    assert m.spread == (pytest.approx(2.0), pytest.approx(2.0))


def test_alternating_without_a_rated_b_has_no_speedup():
    m = ts.alternating([("A", [0.1, 0.1, 0.1]), ("B", [0.1, 0.1])])
    assert m.speedup is None and m.spread is None


def _noisy_trial(seed: int, labels: str, steps: int, truth: float) -> list[tuple[str, list[float]]]:
    """Stretches of a job the fix makes ``truth`` times faster, on a machine that drifts (a random
    walk of ±10% a stretch: neighbours come and go) with 20% step-to-step noise."""
    rng = random.Random(seed)
    machine, out = 1.0, []
    for label in labels:
        machine *= rng.uniform(0.9, 1.1)
        mean = 0.01 * machine / (truth if label == "B" else 1.0)
        out.append((label, [0.05] + [max(1e-4, rng.gauss(mean, 0.2 * mean)) for _ in range(steps)]))
    return out


def test_every_interval_holds_its_point():
    for seed in range(300):
        m = ts.alternating(_noisy_trial(seed, "ABABAB"[: 3 + seed % 4], 3 + seed % 9, 1.3))
        assert m.spread is not None and m.spread[0] <= m.speedup <= m.spread[1], (seed, m)


def test_the_interval_mostly_holds_the_truth():
    # A 95% interval over two or three pairs of 8-step stretches holds the truth in 87-90% of these
    # trials (a bootstrap over few pairs under-covers a little); it must not fall far below.
    held = sum(
        m.spread[0] <= 1.3 <= m.spread[1]
        for m in (ts.alternating(_noisy_trial(seed, "ABAB" if seed % 2 else "ABABAB", 8, 1.3)) for seed in range(300))
    )
    assert held >= 240


def _saving_trial(seed: int, truth: float, labels: str = "ABABAB") -> list[tuple[str, list[float]]]:
    """Stretches of 15 steps over a save every 5 steps (the 5th, 10th and 15th of each): a 5 ms
    step, a save of 200 ms (±30%) that the fix makes ``truth`` times cheaper."""
    rng = random.Random(seed)
    out = []
    for label in labels:
        save = 0.2 / (truth if label == "B" else 1.0)
        steps = [max(1e-3, rng.gauss(save, 0.3 * save)) if i % 5 == 4 else rng.gauss(0.005, 5e-4) for i in range(15)]
        out.append((label, steps))
    return out


def test_a_periodic_cost_is_resampled_in_whole_periods():
    # Blocks of sqrt(n) steps draw 0 to 3 of a stretch's saves, and a save is most of its
    # stretch's time; whole periods keep every resample's save count, so the interval shows only
    # how the saves themselves vary.
    wide, narrow = [], []
    for seed in range(40):
        segs = _saving_trial(seed, 1.0)
        old, new = ts.alternating(segs), ts.alternating(segs, period=5)
        assert old.speedup == new.speedup and new.spread is not None and old.spread is not None
        assert new.spread[0] <= new.speedup <= new.spread[1]
        wide.append(old.spread[1] / old.spread[0])
        narrow.append(new.spread[1] / new.spread[0])
    assert sorted(narrow)[20] < 0.7 * sorted(wide)[20]  # measured: median width 1.59x against 2.88x


def test_a_periodic_interval_holds_the_truth_and_tells_a_change():
    # measured over 200 seeds: three pairs hold the truth in 88% of trials (as the loader trials'
    # bootstrap over few pairs does), and tell a save 1.5x cheaper from none in 81%
    trials = [ts.alternating(_saving_trial(seed, 1.0), period=5) for seed in range(100)]
    assert sum(m.spread[0] <= 1.0 <= m.spread[1] for m in trials) >= 80
    faster = [ts.alternating(_saving_trial(seed, 1.5), period=5) for seed in range(100)]
    assert sum(m.spread[0] > 1.0 for m in faster) >= 70


def test_the_last_step_of_a_periodic_stretch_is_drawn_like_any_other():
    # The writer's unfinished work is charged to a stretch's last step: a resample that drew it
    # less often than the others would make the fix look cheaper than it measured.
    stretch = [0.001] * 14
    stretch[3], stretch[8], stretch[13] = 0.02, 0.02, 0.2  # the last save carries 180 ms of charge
    rng = random.Random(0)
    mean = sum(sum(ts._resample(stretch, rng, period=5)) for _ in range(4000)) / 4000
    assert mean == pytest.approx(sum(stretch), rel=0.05)


def test_worker_candidates():
    assert worker_candidates(2, 0, 2, "prep", 30) == [2, 1, 3]
    assert worker_candidates(2, 0, 4, "prep", 30) == [2]  # fewer than the cores, CPU-bound: one is enough
    assert worker_candidates(4, 2, 2, "fetch", 40) == [4, 8]  # 2 is what it has already
    assert worker_candidates(2, 0, 2, "prep", 10) == [2]  # the budget holds one candidate


def test_plan_takes_top_fixes_once():
    rec = {"num_workers": {"seen": 0, "recommended": 2}, "prefetch_factor": {"seen": None, "recommended": 4}}
    findings = [("dataloader", 2.0), ("preprocessing", 2.0), ("storage", 2.0), ("logging", 1.5), ("checkpoint", 3.0)]
    plans = plan_trials(findings, rec, 0, 4, "prep", 40)
    assert [p.fix for p in plans] == ["dataloader", "logging"]
    assert plans[0].candidates == [{"num_workers": 2, "prefetch_factor": 4}]
    assert plan_trials([("transfer", 2.0), ("host", None)], rec, 0, 4, "prep", 40) == []
    # nothing to change in the loader: no loader trial
    assert [
        p.fix
        for p in plan_trials([("dataloader", 2.0)], {"num_workers": {"seen": 2, "recommended": 2}}, 2, 2, "prep", 40)
    ] == []


def test_runner_alternates_the_background_writer():
    info = TrialsInfo(enabled=True, steps_requested=12)
    said: list[str] = []
    runner = TrialRunner(info, said.append)
    assert runner.begin([PlannedTrial("logging", 3.0)], None)
    assert "background thread" in said[0]
    installed = []
    durations = {"A": 0.02, "B": 0.01}
    done = False
    while not done:
        seg = runner.segment
        installed.append((seg.label, isinstance(sys.stdout, AsyncStream)))
        done = runner.on_step(durations[seg.label])
    assert not isinstance(sys.stdout, AsyncStream)  # put back at the end
    assert {label: on for label, on in installed} == {"A": False, "B": True}
    assert [label for label, _ in installed] == ["A"] * 3 + ["B"] * 3 + ["A"] * 3 + ["B"] * 3
    (trial,) = info.trials
    # the B stretches' last steps also carry the wait for the writer's queue (a thread join here)
    assert trial.fix == "logging" and trial.measured_speedup == pytest.approx(2.0, rel=0.05)
    assert trial.steps == 6 and [s.label for s in trial.segments] == ["A", "B", "A", "B"]


def test_promise_never_in_the_wrong_direction():
    assert _promise(1.02, None) is None
    assert _promise(1.5, MIN_PROMISE - 0.01) is None
    assert _promise(1.5, 1.3) == 1.3  # the smaller model's gain
    assert _promise(1.3, 1.5) == 1.3


def test_report_quotes_the_trial_in_the_verdict_and_the_top_finding():
    record = load_record(OLD_RECORD)
    record.trials = TrialsInfo(
        True,
        40,
        "",
        [
            TrialRecord(
                "dataloader", {"num_workers": 2, "prefetch_factor": 4}, 2.0, 40.0, 59.2, 1.48, [1.3, 1.6], 40, 0.5
            )
        ],
    )
    report = build_report(record)
    assert len(report.trials) == 1
    top = report.findings[0]
    assert top.check == "dataloader" and top.measured_speedup == 1.48
    quote = f"measured 1.48× in a 40-step trial with num_workers=2, prefetch_factor=4; predicted {top.expected_speedup:.1f}×"
    assert quote in report.verdict.sentence
    assert quote in top.evidence and "95% interval 1.30–1.60×" in top.evidence
    assert report.to_dict()["trials"][0]["measured_speedup"] == 1.48


@pytest.mark.parametrize(
    "measured, spread, words",
    [(0.88, [0.84, 0.93], "slower than unchanged: do not apply"), (1.1, [0.95, 1.3], "no clear difference")],
)
def test_a_trial_that_is_not_faster_says_so_wherever_it_is_quoted(measured, spread, words):
    record = load_record(OLD_RECORD)
    record.trials = TrialsInfo(
        True, 40, "", [TrialRecord("dataloader", {"num_workers": 3}, 2.0, 40.0, 40 * measured, measured, spread, 40)]
    )
    report = build_report(record)
    top = report.findings[0]
    assert top.check == "dataloader"
    assert words in report.verdict.sentence and words in top.evidence
    assert report.trials[0].decision == ("slower" if measured < 1 else "no difference")


def test_old_record_has_no_trials():
    report = build_report(load_record(OLD_RECORD))
    assert report.trials == [] and "measured" not in report.verdict.sentence


def _drive(runner: TrialRunner, duration: Callable[[Any], float]) -> None:
    done = False
    while not done:
        done = runner.on_step(duration(runner.segment))


def test_loader_candidates_are_chosen_side_by_side_and_measured_on_fresh_stretches():
    import torch

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(64, 2)), batch_size=4)
    info = TrialsInfo(enabled=True, steps_requested=40)
    runner = TrialRunner(info, lambda line: None)
    candidates = [{"num_workers": n, "prefetch_factor": 2} for n in (2, 1, 3)]
    assert runner.begin([PlannedTrial("dataloader", 2.0, candidates)], loader)
    assert [(s.round, s.label) for s in runner.segments] == [("select", "A")] + [("select", "B")] * 3 + [
        ("measure", label) for label in "ABAB"
    ]
    # Unchanged 50 steps/s; in the choice 2 workers run at 80/s, 1 at 60/s, 3 at 100/s. On the fresh
    # stretches the chosen 3 workers run at 75/s: its choice-round rate was luck.
    choice = {2: 0.0125, 1: 1 / 60, 3: 0.01}

    def duration(seg: Any) -> float:
        if seg.label == "A":
            return 0.02
        return choice[seg.settings["num_workers"]] if seg.round == "select" else 1 / 75

    _drive(runner, duration)
    (trial,) = info.trials
    assert trial.settings == {"num_workers": 3, "prefetch_factor": 2}
    assert trial.measured_speedup == pytest.approx(1.5)  # 75 over 50, never the choice round's 2.0
    assert trial.spread[0] <= trial.measured_speedup <= trial.spread[1]
    assert [s.settings.get("num_workers") for s in trial.segments if s.round == "measure" and s.label == "B"] == [3, 3]
    assert trial.note.startswith("chosen from num_workers=2 (80.0 steps/s)") and "fresh stretches" in trial.note
    assert trial.steps == sum(s.steps for s in trial.segments if s.round == "measure" and s.label == "B")


def test_an_undecided_trial_runs_more_pairs_then_answers():
    info = TrialsInfo(enabled=True, steps_requested=12)
    runner = TrialRunner(info, lambda line: None)
    assert runner.begin([PlannedTrial("logging", 2.0)], None)
    rng = random.Random(3)
    # The fix changes nothing; the steps are noisy enough that two pairs cannot tell ±5% apart.
    _drive(runner, lambda seg: 0.01 * rng.uniform(0.6, 1.4))
    (trial,) = info.trials
    pairs = sum(s.label == "B" for s in trial.segments)
    assert 2 < pairs <= 2 + 2  # one or two extra pairs, never more
    assert trial.spread[0] <= trial.measured_speedup <= trial.spread[1]


def test_a_workers_exception_is_one_line_naming_what_it_raised_and_where() -> None:
    from supplyline.doctor.trial_crash import one_line

    text = (
        "Caught RuntimeError in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 374, in _worker_loop\n'
        "    data = fetcher.fetch(index)\n"
        '  File "/home/me/data/ds.py", line 25, in __getitem__\n'
        '    raise RuntimeError("handle only valid in its own process")\n'
        "RuntimeError: handle only valid in its own process\n"
    )
    assert one_line(RuntimeError(text)) == (
        "DataLoader worker 1 raised RuntimeError: handle only valid in its own process at ds.py:25 in __getitem__"
    )
    assert one_line(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert one_line(KeyError()) == "KeyError"


def test_a_stretch_that_drew_down_its_ready_batches_is_rated_at_what_its_workers_make() -> None:
    from supplyline.doctor.trial_stats import MAX_INVENTORY_FACTOR, inventory_factor

    # 10 rated steps after a skip of 8: 6 batches ready when rating began, 1 at the end: the workers
    # made 5 of the 10 taken, so in the steady state the steps take twice as long
    assert inventory_factor([8, 7, 7, 6, 6, 6, 6, 6, 5, 4, 4, 3, 3, 2, 2, 1, 1, 1], 8) == pytest.approx(2.0)
    assert inventory_factor([2] * 18, 8) == 1.0  # a queue that held its level: as measured
    assert inventory_factor([0] * 8 + [1] * 10, 8) == pytest.approx(10 / 11)  # it grew: faster than taken
    assert inventory_factor([8] * 8 + [0] * 10, 8) == MAX_INVENTORY_FACTOR  # 10 / 2, capped
    assert inventory_factor([None] * 18, 8) == 1.0 and inventory_factor([3, 2], 2) == 1.0


def test_ready_batches_counts_a_real_loaders_queue() -> None:
    import time

    from torch.utils.data import DataLoader

    from supplyline.doctor.trials import ready_batches

    assert ready_batches(iter(DataLoader(list(range(64)), batch_size=4))) is None  # no workers: nothing to count
    it = iter(DataLoader(list(range(64)), batch_size=4, num_workers=2, prefetch_factor=2))
    try:
        next(it)
        deadline = time.monotonic() + 30
        # 2 workers x 2 outstanding; the batch taken was replaced by a new index at once: 4 come
        while ready_batches(it) != 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ready_batches(it) == 4
        next(it)
        assert ready_batches(it) in (3, 4)  # one taken; its replacement asked for, made or not yet
    finally:
        it._shutdown_workers()


class _HangsInWorkers:
    """A dataset that serves in the training process and never in a worker (a worker waiting on
    threads it did not inherit, as MosaicML's did)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> int:
        import time

        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            time.sleep(600)
        return i


def test_a_trial_loader_that_never_delivers_times_out_instead_of_hanging_the_job(monkeypatch):
    from torch.utils.data import DataLoader

    from supplyline.doctor import trials

    monkeypatch.setattr(trials, "TRIAL_BATCH_TIMEOUT_S", 2.0)
    info = TrialsInfo(enabled=True, steps_requested=12)
    runner = TrialRunner(info, lambda line: None)
    loader = DataLoader(_HangsInWorkers(), batch_size=4, num_workers=0)
    plan = PlannedTrial("dataloader", 2.0, candidates=[{"num_workers": 1, "prefetch_factor": 2}])
    assert runner.begin([plan], loader)
    while runner.segment is not None and runner.segment.label != "B":
        runner.on_step(0.01)
    assert runner._trial_loader.timeout == 2.0  # the script's loader had none of its own
    with pytest.raises(RuntimeError, match="timed out"):
        runner.next_batch(lambda it: next(it))
    runner.fail("the trial's loader timed out")
    (trial,) = info.trials
    assert trial.failed and trial.measured_speedup is None

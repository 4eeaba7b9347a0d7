"""Fix trials: after the observed steps (and the what-if phases), the real training goes on for a
labelled phase with the top findings' fixes applied in-process, and the gain is measured.

- DataLoader (``dataloader``/``storage`` findings): the loop's batches come from
  ``apply.loader.rebuild_loader`` over the same dataset, sampler, collate and worker init with the
  recommended settings. Worker start-up (building the iterator up to its first batch) is timed
  apart and kept out of the rate. Where the right worker count is uncertain (latency-bound reads,
  or as many workers as cores), up to three counts are tried and the fastest is kept.
- Logging and checkpoints: ``apply.writes.BackgroundWrites`` / ``apply.checkpoint.BackgroundSaves``
  are installed for the ``B`` stretches of an ``A B A B`` alternation, so drift on a shared machine
  touches both sides.

Trial steps are real optimizer updates; they are labelled 2 in the record's ``steps.whatif`` and
kept out of the observed figures. Any failure ends the trial with a note; the job is then stopped
the way the what-if phases stop it, and its exit code is never changed.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from supplyline.analyze.trial_result import EQUIVALENT  # inside ±5%: "no difference", no gain worth a change
from supplyline.collect.checkpoints import group_checkpoints
from supplyline.collect.events import LOADER_KEYS, SaveEvent, TrialRecord, TrialSegment, TrialsInfo
from supplyline.doctor import trial_stats

TRIAL_LABEL = 2.0  # steps.whatif: 0 observed, 1 compute-only replay, 2 fix trial
LOADER_FIXES = ("dataloader", "storage")
WRITE_FIXES = ("logging", "checkpoint")
MAX_TRIALS = 2  # the top findings with a fix the doctor can apply in-process
MAX_CANDIDATES = 3
MIN_CANDIDATE_STEPS = 8  # a worker-count candidate gets at least this many steps
MIN_PERIODIC_PAIRS = 3  # A/B pairs a trial over a periodic cost (saves every 5 steps) has before it decides
MAX_EXTRA_PAIRS = 2  # A/B pairs a trial may add while its interval still holds 1.0
# ... and a trial over a periodic cost: its stretches are short in time (a few saves each), and the
# saves' cost moves from pair to pair (pair ratios 0.48-1.07 on the planted 32 MB job, truth 0.77x):
# four pairs left every interval holding 1.0, eight are what that spread needs.
MAX_EXTRA_PERIODIC_PAIRS = 6
# A trial loader's batch that takes longer than this is a hung worker, not a slow one (a MosaicML
# worker once waited forever on threads it did not inherit): the trial fails with torch's "DataLoader
# timed out" and the job goes on, where without it the job would hang. A loader with a timeout of its
# own keeps that.
TRIAL_BATCH_TIMEOUT_S = 120.0

WHAT_CHANGES = {
    "loader": "a new {kind} over the same dataset and sampler with {settings} (the data order within the "
    "epoch continues from the sampler)",
    # An IterableDataset has no sampler to continue from: the new loader's workers read it afresh.
    "iterable": "a new {kind} over the same IterableDataset with {settings} (its workers iterate the dataset "
    "afresh: the samples restart from its beginning, split between the workers as the dataset splits them)",
    "logging": "print, logging handlers and fsync are handed to a background thread in alternate stretches: "
    "lines reach their files and the disk a little later, in the same order",
    "checkpoint": "torch.save is snapshotted on the call and written by a background thread to the same path "
    "in alternate stretches; anything that looks at the file or its folder waits for the write",
}


@dataclass
class PlannedTrial:
    fix: str  # the finding's check
    predicted: float | None
    candidates: list[dict[str, Any]] = field(default_factory=list)  # loader settings to try, best guess first
    # Checkpoints saved every ``period`` steps, the last in step ``last_save``: the A/B stretches are
    # laid out in whole periods (trial_stats.ab_schedule).
    period: int | None = None
    last_save: int = 0


def save_period(saves: list[SaveEvent]) -> tuple[int | None, int]:
    """Checkpoints saved on a regular step cadence: (steps between them, the step of the last);
    (None, 0) when there are fewer than two or the gaps differ (saves by time, on improvement)."""
    steps = [c.step for c in group_checkpoints([s for s in saves if s.in_step]) if c.step is not None]
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    if len(gaps) != 1 or min(gaps) < 1:
        return None, 0
    return gaps.pop(), steps[-1]


def loader_settings(recommended: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """The DataLoader settings a report recommends that differ from those seen."""
    out: dict[str, Any] = {}
    for key in LOADER_KEYS:
        entry = (recommended or {}).get(key)
        if isinstance(entry, dict) and entry.get("recommended") is not None and entry["recommended"] != entry["seen"]:
            out[key] = entry["recommended"]
    return out


def worker_candidates(
    recommended: int, seen: int, cores: int, stall: str, budget_steps: int, shards: int | None = None
) -> list[int]:
    """The worker counts to try, the recommendation first.

    Certain enough to try one: CPU-bound preparation with fewer workers than cores. Uncertain:
    latency-bound reads (how many reads in flight help is the storage's business) and counts at
    the core count, where the workers compete with the training step for the cores. ``shards``: a
    sharded IterableDataset's count, past which a worker gets no data (no candidate goes past it).
    """
    counts = [recommended]
    if stall == "fetch":
        counts += [recommended // 2, recommended * 2]
    elif recommended >= cores:
        counts += [recommended - 1, recommended + 1]
    room = max(1, min(MAX_CANDIDATES, budget_steps // MIN_CANDIDATE_STEPS))
    kept: list[int] = []
    for c in counts:
        if c >= 1 and c != seen and c not in kept and (not shards or c <= shards):
            kept.append(c)
    return kept[:room]


def plan_trials(
    findings: list[tuple[str, float | None]],
    recommended: dict[str, dict[str, Any]] | None,
    seen_workers: int,
    cores: int,
    stall: str,
    budget_steps: int,
    shards: int | None = None,
) -> list[PlannedTrial]:
    """The fixes to try, from the findings (check, expected speed-up) in report order."""
    plans: list[PlannedTrial] = []
    for check, predicted in findings:
        if len(plans) >= MAX_TRIALS or any(p.fix == check or {p.fix, check} <= set(LOADER_FIXES) for p in plans):
            continue
        if check in LOADER_FIXES:
            settings = loader_settings(recommended)
            if "num_workers" not in settings:
                continue
            counts = worker_candidates(settings["num_workers"], seen_workers, cores, stall, budget_steps, shards)
            if not counts:
                continue
            plans.append(PlannedTrial(check, predicted, [{**settings, "num_workers": c} for c in counts]))
        elif check in WRITE_FIXES:
            plans.append(PlannedTrial(check, predicted))
    return plans


def loader_kind(loader: Any) -> str:
    """The class a loader trial rebuilds (``apply.loader.rebuild_loader`` keeps a StatefulDataLoader's own)."""
    return type(loader).__name__ if loader is not None else "DataLoader"


def describe(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def describe_candidates(candidates: list[dict[str, Any]]) -> str:
    """``num_workers=2, 1 or 3 (prefetch_factor=4, persistent_workers=True)``: what differs, then
    what all candidates share, so the announcement fits a line."""
    if len(candidates) < 2:
        return describe(candidates[0]) if candidates else ""
    keys = list(dict.fromkeys(k for c in candidates for k in c))
    same = [k for k in keys if all(k in c and c[k] == candidates[0][k] for c in candidates)]
    differ = [k for k in keys if k not in same]
    words = []
    for k in differ:
        values = [str(c.get(k, "unchanged")) for c in candidates]
        words.append(f"{k}={', '.join(values[:-1])} or {values[-1]}")
    shared = f" ({describe({k: candidates[0][k] for k in same})})" if same else ""
    return "; ".join(words) + shared if words else describe(candidates[0])


@dataclass
class _Segment:
    plan: int  # index into the plans
    label: str
    steps: int
    settings: dict[str, Any] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)
    startup_s: float | None = None
    done: bool = False
    round: str = ""  # a loader trial's "select" or "measure" round (TrialSegment.round)
    ready: list[int | None] = field(default_factory=list)  # batches the stretch's loader held ready, per step end


class TrialRunner:
    """Drives the segments from the step clock's ``on_step_closed`` and the DataLoader hook."""

    def __init__(self, info: TrialsInfo, say: Callable[[str], None] | None = None) -> None:
        self.info = info
        self.say = say or _say
        self.plans: list[PlannedTrial] = []
        self.segments: list[_Segment] = []
        self.current = -1
        self.loader: Any = None  # the training DataLoader as the script made it
        self._trial_iter: Any = None
        self._fix: Any = None  # the installed BackgroundWrites / BackgroundSaves of a B stretch
        self._fix_counts: dict[int, list[str]] = {}
        self._snapshot: Any = None  # the checkpoint copy of the last B stretch, whose memory the next reuses
        self._startup_pending = False
        self._trial_kind: str | None = None  # the class of the last loader a loader trial built
        self.active = False
        # Saves a B stretch wrote in the background that failed and were never raised to the script:
        # the script believes them on disk, so the doctor's exit code must not say success.
        self.lost_saves: list[str] = []
        self._extended: dict[int, int] = {}  # plan -> A/B pairs added because the interval held 1.0
        self._a_skip = 1  # steps an unchanged stretch leaves out: the script's workers' ready batches
        self._script_workers = 0
        self.step_s = 0.0  # the observed median step: how long the announced steps will take
        self._failed: tuple[int, dict[str, Any], str] | None = None  # (plan, settings, why) of a fix that failed
        self.passes = 0  # new passes over the dataset a trial loader began when it reached its end
        self._restore_epoch: Callable[[], None] = lambda: None  # apply.dataset_state.hold_epoch

    # -- planning ---------------------------------------------------------------------------
    def begin(self, plans: list[PlannedTrial], loader: Any, first_step: int = 0) -> bool:
        """Lay out the segments and start the first (``first_step``: the index the trial's first step
        will have in the record); False when there is nothing to try."""
        self.plans, self.loader = plans, loader
        steps = self.info.steps_requested
        for i, plan in enumerate(plans):
            at = first_step + sum(s.steps for s in self.segments)
            if plan.fix in LOADER_FIXES:
                if loader is None:
                    self.info.note = _join(self.info.note, f"{plan.fix}: the training DataLoader object was not seen")
                    continue
                self._script_workers = getattr(loader, "num_workers", 0) or 0
                self._a_skip = trial_stats.loader_skip(
                    {"num_workers": self._script_workers, "prefetch_factor": getattr(loader, "prefetch_factor", None)}
                )
                self.segments += self._loader_layout(i, plan, steps)
            else:
                lead = (plan.last_save + 1 - at) % plan.period if plan.period else 0
                schedule = trial_stats.ab_schedule(steps, period=plan.period, lead=lead)
                self.segments += [_Segment(i, label, n) for label, n in schedule]
        if not self.segments:
            return False
        self.active = True
        from supplyline.apply.dataset_state import hold_epoch

        self._restore_epoch = hold_epoch(getattr(loader, "dataset", None))
        self._announce()
        self._start(0)
        return True

    def _loader_layout(self, index: int, plan: PlannedTrial, steps: int) -> list[_Segment]:
        """``A C1 C2 C3`` to choose (the unchanged loader and each candidate once, side by side in
        time), then ``A B A B`` of the chosen one on fresh stretches: the figure. A figure taken from
        the stretch that won the choice would be the best of several noisy rates, biased upward (the
        winner's curse); a single candidate skips the choice."""
        out: list[_Segment] = []
        if len(plan.candidates) > 1:
            out.append(_Segment(index, "A", 0, round="select"))
            out += [_Segment(index, "B", 0, dict(c), round="select") for c in plan.candidates]
        # Until the choice, the measuring B stretches are sized for the largest candidate's queue.
        chosen = plan.candidates[0] if len(plan.candidates) == 1 else max(plan.candidates, key=trial_stats.loader_skip)
        for label in "ABAB":
            out.append(_Segment(index, label, 0, dict(chosen) if label == "B" else {}, round="measure"))
        select_each = max(MIN_CANDIDATE_STEPS, steps // (len(plan.candidates) + 1))
        measure_each = max(MIN_CANDIDATE_STEPS, steps // 4)
        for k, seg in enumerate(out):
            each = select_each if seg.round == "select" else measure_each
            seg.steps = self._loader_steps(each, seg, out[k - 1] if k else None)
        return out

    def _loader_steps(self, each: int, seg: _Segment, before: _Segment | None) -> int:
        """A loader stretch holds as many rated steps as it leaves out, at the least: a loader whose
        workers wait on reads delivers in waves of one batch per worker, and a rate needs several."""
        return max(each, 2 * (self._own_skip(seg) + self._refill_skip(seg, before)) + 2)

    def _queue(self, seg: _Segment) -> int:
        """Batches the loader of ``seg`` holds ready once its workers have filled their queues: the
        steps it skips itself, none for an unchanged loader without workers (its skip is the switch)."""
        return 0 if seg.label != "B" and not self._script_workers else self._own_skip(seg)

    def _own_skip(self, seg: _Segment) -> int:
        return trial_stats.loader_skip(seg.settings) if seg.label == "B" else self._a_skip

    def _refill_skip(self, seg: _Segment, before: _Segment | None) -> int:
        """Steps a loader stretch also leaves out while the loader of the stretch before refills its
        queue beside it: those workers take cores from this stretch's steps. Left in, the unchanged
        stretches paid for the new loader's refill and the planted prep-bound jobs read +7% and +24%
        over the truth (benchmarks/prediction_accuracy.py). A faster new loader refills within as
        many steps of the unchanged one as it holds batches (and one candidate after another about
        the same); the slower unchanged one's workers refill over about twice as many steps of the
        new one."""
        if before is None or (before.label == seg.label and before.settings == seg.settings):
            return 0
        queued = self._queue(before)
        return 2 * queued if seg.label == "B" and before.label == "A" else queued

    def _choose(self, index: int) -> None:
        """The choice round of plan ``index`` ended: its fastest candidate fills the measuring stretches
        (none rated: they are dropped, and the trial says so)."""
        plan = self.plans[index]
        rated = [
            s for s in self.segments if s.plan == index and s.round == "select" and s.label == "B" and self._rate(s)
        ]
        waiting = [s for s in self.segments if s.plan == index and s.round == "measure" and not s.durations]
        if not rated:
            self.segments = [s for s in self.segments if s not in waiting]
            return
        best = max(rated, key=lambda s: self._rate(s) or 0.0)
        each = max(MIN_CANDIDATE_STEPS, self.info.steps_requested // 4)
        for seg in waiting:
            if seg.label == "B":
                seg.settings = dict(best.settings)
        for seg in waiting:
            seg.steps = self._loader_steps(each, seg, self._before(seg))
        self.say(
            f"{plan.fix}: chose {describe(best.settings)}; measuring it against the unchanged loader on fresh stretches"
        )

    def _maybe_extend(self, index: int) -> None:
        """Plan ``index``'s last stretch ended: while its interval holds 1.0 and reaches past ±5% (no
        answer yet), one more A/B pair, up to ``MAX_EXTRA_PAIRS`` (``MAX_EXTRA_PERIODIC_PAIRS``); "faster", "slower" and "no
        difference" are all answers."""
        plan = self.plans[index]
        if self._extended.get(index, 0) >= (MAX_EXTRA_PERIODIC_PAIRS if plan.period else MAX_EXTRA_PAIRS):
            return
        segs = [s for s in self.segments if s.plan == index and s.durations and s.label in ("A", "B")]
        measure = [s for s in segs if s.round in ("", "measure")]
        m = trial_stats.alternating(
            [(s.label, self._steady(s)) for s in measure], [self._skip(s) for s in measure], period=plan.period
        )
        # A periodic cost's interval draws from few saves a stretch (trial_stats._resample): on two
        # pairs it held the truth in 80% of synthetic trials, on three in 88%; so three at least.
        few = plan.period is not None and sum(s.label == "B" for s in measure) < MIN_PERIODIC_PAIRS
        if m.speedup is None or m.spread is None:
            return
        if not few and (m.spread[0] > 1.0 or m.spread[1] < 1.0):
            return  # decided: faster, or slower
        if not few and 1 / EQUIVALENT <= m.spread[0] and m.spread[1] <= EQUIVALENT:
            return  # decided: no difference worth a change
        last_a = next(s for s in reversed(measure) if s.label == "A")
        last_b = next((s for s in reversed(measure) if s.label == "B"), None)
        if last_b is None:
            return
        self._extended[index] = self._extended.get(index, 0) + 1
        pair = [
            _Segment(index, "A", last_a.steps, round=last_a.round),
            _Segment(index, "B", last_b.steps, dict(last_b.settings), round=last_b.round),
        ]
        self.segments[self.current + 1 : self.current + 1] = pair
        more = sum(p.steps for p in pair)
        left = f" (~{more * self.step_s:.0f} s)" if self.step_s and more * self.step_s >= 1 else ""
        why = "holding 1.0" if m.spread[0] <= 1.0 <= m.spread[1] else "too few stretches to rest on"
        self.say(
            f"{plan.fix}: {m.speedup:.2f}× so far ({m.spread[0]:.2f}–{m.spread[1]:.2f}, {why}): "
            f"{more} more steps to decide{left}"
        )

    def _announce(self) -> None:
        parts = []
        for i, plan in enumerate(self.plans):
            if not any(s.plan == i for s in self.segments):
                continue
            if plan.fix in LOADER_FIXES:
                tried = describe_candidates(plan.candidates)
                from torch.utils.data import IterableDataset  # torch is loaded: the job runs

                from supplyline.apply.dataset_state import copies_dataset

                iterable = isinstance(getattr(self.loader, "dataset", None), IterableDataset)
                words = WHAT_CHANGES["iterable" if iterable else "loader"]
                if copies_dataset(self.loader):
                    words = words.replace("over the same", "over a copy of the same")  # apply.dataset_state
                parts.append(words.format(kind=loader_kind(self.loader), settings=tried))
            else:
                parts.append(WHAT_CHANGES[plan.fix])
        total = sum(s.steps for s in self.segments)
        left = f", ~{total * self.step_s:.0f} s" if self.step_s and total * self.step_s >= 1 else ""
        self.say(
            f"trying the fix on the job for about {total} more steps{left} (real optimizer updates; --no-try "
            "skips this): " + "; ".join(parts)
        )

    # -- segments ---------------------------------------------------------------------------
    @property
    def segment(self) -> _Segment | None:
        return self.segments[self.current] if 0 <= self.current < len(self.segments) else None

    @property
    def wants_batches(self) -> bool:
        seg = self.segment
        return seg is not None and seg.label == "B" and self.plans[seg.plan].fix in LOADER_FIXES

    def _start(self, index: int) -> None:
        self.current = index
        seg = self.segments[index]
        fix = self.plans[seg.plan].fix
        if seg.label != "B":
            return
        if fix in LOADER_FIXES:
            from supplyline.apply.loader import rebuild_loader

            self._startup_pending = True
            settings = dict(seg.settings)
            if int(settings.get("num_workers", 0) or 0) and not getattr(self.loader, "timeout", 0):
                settings["timeout"] = TRIAL_BATCH_TIMEOUT_S
            with _quiet_worker_count():
                self._trial_loader = rebuild_loader(self.loader, settings)
            self._trial_kind = type(self._trial_loader).__name__
            self._trial_iter = None  # made at the first fetch, so its start-up is timed there
        elif fix == "logging":
            from supplyline.apply.writes import BackgroundWrites

            self._fix = BackgroundWrites().install()
        elif fix == "checkpoint":
            from supplyline.apply.checkpoint import BackgroundSaves

            # The last stretch's copy lends its memory: a job saving every few steps copies into
            # warm pages, as it would under `supplyline run --apply async_save` after its first save.
            self._fix = BackgroundSaves(reuse=self._snapshot).install()

    def _end_segment(self) -> None:
        seg = self.segment
        if seg is None or seg.done:
            return
        seg.done = True
        problems: list[str] = []
        if self._trial_iter is not None:
            # litdata's StreamingDataLoader iterates in a generator around torch's iterator: closing
            # it drops that iterator, whose workers then shut down.
            shutdown = getattr(self._trial_iter, "_shutdown_workers", None) or getattr(self._trial_iter, "close", None)
            if shutdown is not None:
                shutdown()
            self._trial_iter = None
            self._trial_loader = None
        if self._fix is not None:
            fix, self._fix = self._fix, None
            counts = self._fix_counts.setdefault(seg.plan, [])
            # The writes still queued are this stretch's work: the wait for them is charged to its last
            # step, or a stretch that ends with a save in flight would look free of its cost (saves that
            # take longer than the steps between them gain nothing in the background, and must not
            # seem to).
            t = time.perf_counter()
            if hasattr(fix, "syncs_queued"):
                fix.finish()
                problems += [f"a background write failed: {e}" for e in fix.errors]
                counts.append(f"{fix.items} writes ({fix.syncs_queued} fsyncs)")
            else:
                failed = fix.finish()
                self._snapshot = fix.last_snapshot
                if failed:
                    problems.append(failed)
                    self.lost_saves.append(failed)
                counts.append(f"{fix.saves} save(s)")
            waited = time.perf_counter() - t
            if seg.durations:
                # What the writer did beyond the stretch's own time is what the stretch could not hide;
                # the last write in flight is not (a long run carries one in flight at every moment: a
                # 7-step stretch charged its drain read the fsync job 21% low).
                busy = getattr(fix, "busy_s", None)
                untimed = getattr(fix, "untimed", 0)  # saves torch's own writer threads made: not timed
                # Against the rated steps (all but the first): the first holds the switch (a fresh
                # saver's first copy into new memory took 49 ms of a 135 ms stretch), and counted,
                # it hid a writer that kept its 14 rated steps waiting (90 ms of writes in 86 ms).
                rated = sum(seg.durations[1:])
                behind = max(0.0, busy - rated) if isinstance(busy, float) and not untimed else waited
                seg.durations[-1] += behind
        for p in problems:
            self.info.note = _join(self.info.note, p)

    def on_step(self, duration_s: float, script_iter: Any = None) -> bool:
        """A trial step closed; returns True when every segment is done (the job is then stopped).
        ``script_iter``: the script's own loader iterator, whose ready batches an unchanged stretch counts."""
        seg = self.segment
        if seg is None:
            return True
        seg.durations.append(duration_s)
        if self.plans[seg.plan].fix in LOADER_FIXES:
            seg.ready.append(ready_batches(self._trial_iter if seg.label == "B" else script_iter))
        if len(seg.durations) < seg.steps:
            return False
        self._end_segment()
        nxt = self.segments[self.current + 1] if self.current + 1 < len(self.segments) else None
        if seg.round == "select" and (nxt is None or nxt.round != "select" or nxt.plan != seg.plan):
            self._choose(seg.plan)
        elif seg.label == "B" and (nxt is None or nxt.plan != seg.plan):
            self._maybe_extend(seg.plan)
        if self.current + 1 < len(self.segments):
            self._start(self.current + 1)
            return False
        self.finish()
        return True

    def next_batch(self, original: Callable[[Any], Any]) -> Any:
        """A batch for the loop from the trial's loader (``original``: the unhooked ``__next__``)."""
        if self._trial_iter is None:
            t = time.perf_counter()
            with _quiet_worker_count():
                self._trial_iter = self._trial_loader._get_iterator()  # past the DataLoader hook: not a new loader
            batch = original(self._trial_iter)
            seg = self.segment
            if seg is not None:
                seg.startup_s = time.perf_counter() - t
            return batch
        try:
            return original(self._trial_iter)
        except StopIteration:
            # A short epoch: the stretch goes on into a new pass over the dataset, as the job's next
            # epoch would (persistent workers are reset, others started again), not cut short.
            self._new_pass()
            return original(self._trial_iter)

    def _new_pass(self) -> None:
        it, loader = self._trial_iter, self._trial_loader
        with _quiet_worker_count():
            if getattr(loader, "persistent_workers", False) and hasattr(it, "_reset"):
                it._reset(loader)
            else:
                shutdown = getattr(it, "_shutdown_workers", None)
                if shutdown is not None:
                    shutdown()
                self._trial_iter = loader._get_iterator()
        self.passes += 1

    def _before(self, seg: _Segment) -> _Segment | None:
        """The stretch of the same plan that ran just before ``seg``."""
        k = next(i for i, s in enumerate(self.segments) if s is seg)
        return next((s for s in reversed(self.segments[:k]) if s.plan == seg.plan), None)

    def _skip(self, seg: _Segment) -> int:
        """Steps a segment leaves out of its rate: a loader's ready batches (the rebuilt one's, or the
        script's workers' after a pause) and the steps while the loader before refills beside it,
        else its first step (the switch)."""
        if self.plans[seg.plan].fix not in LOADER_FIXES:
            return 1
        return self._own_skip(seg) + self._refill_skip(seg, self._before(seg))

    def _rate(self, seg: _Segment) -> float | None:
        return trial_stats.segment_rate(self._steady(seg), self._skip(seg))

    def _steady(self, seg: _Segment) -> list[float]:
        """The stretch's step times as its loader's steady state would give them: a stretch that
        drew down the batches its loader held ready at the start of its rated steps took them faster
        than its workers make them (``trial_stats.inventory_factor``)."""
        skip = max(1, self._skip(seg)) if self.plans[seg.plan].fix in LOADER_FIXES else 1
        factor = trial_stats.inventory_factor(seg.ready, skip)
        return seg.durations if factor == 1.0 else [d * factor for d in seg.durations]

    # -- results ----------------------------------------------------------------------------
    def fail(self, why: str) -> None:
        """The fix itself failed on this job (a trial loader's worker raised): the trial ends, and its
        record says so, so that the advice is no longer that fix."""
        seg = self.segment
        if seg is not None and self.active:
            self._failed = (seg.plan, dict(seg.settings), why)
        self.finish(f"the trial's loader failed: {why}")

    def finish(self, note: str = "") -> None:
        """End whatever runs (idempotent) and write the results into ``info.trials``."""
        if not self.active:
            return
        self.active = False
        try:
            self._end_segment()
        except Exception as exc:
            note = _join(note, f"ending the trial failed: {type(exc).__name__}: {exc}")
        self._snapshot = None  # the copy's memory goes back when the trial ends
        try:
            self._restore_epoch()  # the trial's loaders' workers are gone: the script's epoch counter is its own again
        except Exception as exc:
            note = _join(note, f"restoring the dataset's epoch failed: {type(exc).__name__}: {exc}")
        if self.passes:
            more = "a new pass" if self.passes == 1 else f"{self.passes} new passes"
            note = _join(note, f"the trial's loader reached the end of its epoch and went on into {more} over the data")
        if note:
            self.info.note = _join(self.info.note, note)
        for i, plan in enumerate(self.plans):
            segs = [s for s in self.segments if s.plan == i and s.durations]
            if self._failed is not None and self._failed[0] == i:
                _, settings, why = self._failed
                records = [
                    TrialSegment(s.label, len(s.durations), None, s.settings, s.startup_s, s.round) for s in segs
                ]
                self.info.trials.append(
                    TrialRecord(
                        plan.fix,
                        settings,
                        plan.predicted,
                        None,
                        None,
                        None,
                        segments=records,
                        note=f"failed: {why}",
                        failed=why,
                    )
                )
            elif segs:
                self.info.trials.append(self._result(i, plan, segs))

    def _result(self, index: int, plan: PlannedTrial, segs: list[_Segment]) -> TrialRecord:
        records = [
            TrialSegment(s.label, len(s.durations), self._rate(s), s.settings, s.startup_s, s.round) for s in segs
        ]
        if plan.fix in LOADER_FIXES:
            measure = [s for s in segs if s.round == "measure"]
            m = trial_stats.alternating([(s.label, self._steady(s)) for s in measure], [self._skip(s) for s in measure])
            chosen = next((s for s in measure if s.label == "B" and s.settings), None)
            if m.speedup is None or chosen is None:
                why = (
                    "the job ended before the chosen loader was measured on fresh stretches"
                    if measure
                    else _short(segs)
                )
                return TrialRecord(plan.fix, {}, plan.predicted, None, None, None, segments=records, note=why)
            select = [s for s in segs if s.round == "select"]
            note = ""
            if len(select) > 1:
                unchanged = next((self._rate(s) for s in select if s.label == "A"), None)
                note = (
                    "chosen from "
                    + ", ".join(
                        f"num_workers={s.settings.get('num_workers')} ({self._rate(s) or 0:.1f} steps/s)"
                        for s in select
                        if s.label == "B"
                    )
                    + (f" against {unchanged:.1f} unchanged" if unchanged else "")
                    + "; measured on fresh stretches"
                )
            b_steps = sum(len(s.durations) for s in measure if s.label == "B")
            startups = [s.startup_s for s in measure if s.label == "B" and s.startup_s is not None]
            return TrialRecord(
                plan.fix,
                chosen.settings,
                plan.predicted,
                m.baseline_steps_per_s,
                m.trial_steps_per_s,
                m.speedup,
                list(m.spread) if m.spread else [],
                b_steps,
                sum(startups) / len(startups) if startups else None,
                records,
                note,
                self._trial_kind,
            )
        # The lead only aligns the stretches with the saves: neither a result nor a rate.
        segs = [s for s in segs if s.label != trial_stats.LEAD]
        records = [r for r in records if r.label != trial_stats.LEAD]
        m = trial_stats.alternating([(s.label, s.durations) for s in segs], period=plan.period)
        settings = {"async_logging": True} if plan.fix == "logging" else {"async_save": True}
        counts = self._fix_counts.get(index, [])
        note = f"in the background: {', '.join(counts)}" if counts else ""
        return TrialRecord(
            plan.fix,
            settings,
            plan.predicted,
            m.baseline_steps_per_s,
            m.trial_steps_per_s,
            m.speedup,
            list(m.spread) if m.spread else [],
            sum(len(s.durations) for s in segs if s.label == "B"),
            None,
            records,
            note,
        )


def ready_batches(it: Any) -> int | None:
    """Batches a multi-process DataLoader iterator holds ready for the loop: received out of order
    (``_task_info`` entries that carry their data) plus those waiting in its data queue; None for
    one without workers, or where torch's internals are not these (torch 2.x's dataloader.py)."""
    info = getattr(it, "_task_info", None)
    if not isinstance(info, dict):
        return None
    try:
        received = it._rcvd_idx
        buffered = sum(1 for idx, entry in info.items() if idx >= received and len(entry) == 2)
        return buffered + int(it._data_queue.qsize())
    except Exception:  # qsize is not implemented everywhere (macOS): no count, no correction
        return None


def _short(segs: list[_Segment]) -> str:
    return f"too few steps to rate ({sum(len(s.durations) for s in segs)})"


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _say(line: str) -> None:
    # The real stderr: a background writer may hold the script's own stderr for a while.
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"supplyline doctor: {line}\n")
    stream.flush()


@contextlib.contextmanager
def _quiet_worker_count() -> Iterator[None]:
    """A candidate above the core count is tried on purpose: torch's "more workers than suggested"
    warning would land in the user's output for a choice the doctor made, not the user."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
        yield

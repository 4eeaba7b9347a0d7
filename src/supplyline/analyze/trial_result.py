"""What a fix trial's figure means, in one place, so the verdict, the finding's fix text, the
recommended loader settings, the HTML and ``run --apply auto`` all say the same thing.

A trial measured the fix on the job itself; its answer outranks the model's prediction wherever
both speak of the same setting (the issue this answers: a trial kept ``num_workers=3`` at 2.08x
while the fix text, from the model, recommended 2 and called anything past 2 capped by the cores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supplyline.collect.events import TrialRecord
from supplyline.record import RunRecord

LOADER_TRIALS = ("dataloader", "storage")


def trial_decision(measured: float | None, spread: list[float] | tuple[float, ...] | None) -> str | None:
    """What a trial's 95% interval says: ``faster`` when it lies above 1 and the figure is at least
    5% up, ``slower`` when it lies below 1 and the figure is at least 5% down, else ``no
    difference`` (all three are answers). The 5% band is the margin the planner asks of a fix: a
    tight interval around 0.96x is real but too small to act on, and on a shared machine it is
    within one run's drift (the conv net on all cores: 2 of 5 trials read 0.96x "slower" where
    alternating runs of the kept settings measured 1.00x, 0.97-1.02). A trial without an interval
    (an older record) is read by its point alone."""
    if measured is None:
        return None
    up, down = measured >= EQUIVALENT, measured <= 1 / EQUIVALENT
    if spread is not None and len(spread) == 2:
        lo, hi = spread
        return "faster" if lo > 1.0 and up else "slower" if hi < 1.0 and down else "no difference"
    return "faster" if up else "slower" if down else "no difference"


EQUIVALENT = 1.05  # a change smaller than 5% either way is "no difference": not worth acting on


@dataclass(frozen=True)
class LoaderTrial:
    """The loader settings a trial measured, and its answer."""

    settings: dict[str, Any]
    speedup: float
    spread: tuple[float, float] | None
    decision: str  # faster | slower | no difference | failed
    # Why the fix failed on this job (decision "failed": a worker raised); its speed-up is then 0, never quoted.
    failed: str = ""

    @property
    def workers(self) -> int | None:
        value = self.settings.get("num_workers")
        return value if isinstance(value, int) else None

    @property
    def figure(self) -> str:
        """``1.48× (1.30–1.60)``."""
        interval = f" ({self.spread[0]:.2f}–{self.spread[1]:.2f})" if self.spread else ""
        return f"{self.speedup:.2f}×{interval}"


def loader_trial(record: RunRecord) -> LoaderTrial | None:
    """The record's measured loader trial, if one ran to a figure."""
    """A loader trial whose workers failed is one too (decision ``failed``): it changes the advice."""
    failed = next((t for t in record.trials.trials if t.fix in LOADER_TRIALS and t.failed), None)
    if failed is not None:
        return LoaderTrial(dict(failed.settings), 0.0, None, "failed", failed.failed)
    return measured_trial(record, LOADER_TRIALS)


def measured_trial(record: RunRecord, fixes: tuple[str, ...]) -> LoaderTrial | None:
    """The record's measured trial of one of ``fixes`` (``("checkpoint",)``), if one ran to a figure."""
    found: TrialRecord | None = next(
        (t for t in record.trials.trials if t.fix in fixes and t.measured_speedup is not None), None
    )
    if found is None or found.measured_speedup is None:
        return None
    spread = (found.spread[0], found.spread[1]) if len(found.spread) == 2 else None
    decision = trial_decision(found.measured_speedup, found.spread) or "no difference"
    return LoaderTrial(dict(found.settings), found.measured_speedup, spread, decision)

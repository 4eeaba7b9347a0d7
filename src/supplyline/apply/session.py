"""All of a spec's fixes installed together, plus the one measurement ``run`` makes: optimizer steps.

Order matters at the end: saves are waited for before the writer drains, so that a line the
script printed after its last save is not held behind a write it does not depend on, and the
patches come off newest first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from supplyline.apply.spec import ApplySpec


@dataclass
class StepCounter:
    """Counts optimizer steps with torch's global post-step hook: one call and two stores a step."""

    steps: int = 0
    first_s: float | None = None
    last_s: float | None = None
    _handle: Any = None

    def install(self) -> StepCounter:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handle = register_optimizer_step_post_hook(self._on_step)
        return self

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        now = time.perf_counter()
        if self.first_s is None:
            self.first_s = now
        self.last_s = now
        self.steps += 1

    def uninstall(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def rate(self) -> float | None:
        """Steps per second from the first step to the last: start-up and teardown left out."""
        if self.steps < 2 or self.first_s is None or self.last_s is None or self.last_s <= self.first_s:
            return None
        return (self.steps - 1) / (self.last_s - self.first_s)


@dataclass
class AppliedFixes:
    spec: ApplySpec
    apply_to: str = "auto"
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.loaders: Any = None
        self.writes: Any = None
        self.saves: Any = None
        self.counter = StepCounter()

    def install(self) -> AppliedFixes:
        """Install every fix the spec names; a failure takes back what was already installed."""
        try:
            if self.spec.loader:
                from supplyline.apply.loader import LoaderSettings

                self.loaders = LoaderSettings(self.spec.loader, self.apply_to).install()
            if self.spec.async_save:
                from supplyline.apply.checkpoint import BackgroundSaves

                self.saves = BackgroundSaves().install()
            self.counter.install()
            if self.spec.async_logging:  # last: a failure above still prints through the real streams
                from supplyline.apply.writes import BackgroundWrites

                self.writes = BackgroundWrites().install()
        except BaseException:
            self.finish()
            raise
        return self

    def finish(self) -> list[str]:
        """Every background write done, every patch off; what went wrong, one line each."""
        self.counter.uninstall()
        if self.saves is not None:
            failed = self.saves.finish()
            if failed:
                self.problems.append(failed)
        if self.writes is not None:
            self.writes.finish()
            self.problems.extend(f"a background write failed: {e}" for e in self.writes.errors)
        if self.loaders is not None:
            self.loaders.uninstall()
        return self.problems

    def summary(self) -> str:
        """What was done, for the closing line."""
        parts = []
        if self.loaders is not None:
            parts.append(self.loaders.summary())
        if self.saves is not None:
            parts.append(f"{self.saves.saves} checkpoint(s) written in the background")
            if self.saves.synchronous:  # saves that would fail or might not fit: made on the call, as without us
                why = ", ".join(f"{n} because {reason}" for reason, n in sorted(self.saves.synchronous.items()))
                parts.append(f"{sum(self.saves.synchronous.values())} saved synchronously ({why})")
        if self.writes is not None:
            merged = f" ({self.writes.syncs_merged} more merged into them)" if self.writes.syncs_merged else ""
            parts.append(
                f"{self.writes.items} writes in the background, {self.writes.syncs_queued} of them fsyncs{merged}"
            )
        return "; ".join(parts)

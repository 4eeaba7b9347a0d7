"""What the user asked of the doctor, built once at the command boundary (the CLI's arguments, the
``watch()`` keywords, a framework callback) and handed to the session whole."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class DoctorOptions:
    steps: int | None = None  # stop after this many steps (None: run to the end)
    seconds: float | None = None  # or after this long
    what_if: bool = True  # the replay and drain what-if phases after the observed steps
    what_if_steps: int = 20
    monitor_interval_s: float = 1.0
    sampler_interval_s: float = 0.04
    try_fixes: bool = False  # asked for the fix trial (it runs only when a limit stops the job)
    try_steps: int = 40

    @property
    def trials(self) -> bool:
        """Whether the fix trial can run: it follows the observed steps, so it needs a limit."""
        return self.try_fixes and (self.steps is not None or self.seconds is not None)

    @property
    def trial_needs_a_limit(self) -> bool:
        """The trial was asked for, but no limit ends the observed steps: the record says why not."""
        return self.try_fixes and not self.trials

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DoctorOptions:
        """From ``supplyline doctor``'s parsed arguments."""
        return cls(
            steps=args.steps,
            seconds=args.seconds,
            what_if=args.what_if,
            what_if_steps=args.what_if_steps,
            sampler_interval_s=1.0 / args.sample_hz,
            try_fixes=args.try_fixes,
            try_steps=args.try_steps,
        )

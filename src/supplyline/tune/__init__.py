"""``supplyline tune``: find the fastest DataLoader settings for a dataset within a time budget.

space (what varies) -> target (the user's dataset) -> model (a cheap probe, a saturating throughput
model) -> search (where to measure) -> measure (one configuration, for real) -> report.
"""

from __future__ import annotations

from supplyline.tune.locate import tune_command_for

__all__ = ["tune_command_for"]

"""One verdict for the run: which side of the supply line bounds the step, in one sentence.

The side is the supply-side phase (from the phase table) with the largest share of step time,
when it takes at least ``BOUND_SHARE``; otherwise the step is the model's own (compute) or, when
most of it is in the user's code outside model, loader and I/O, "unknown" with the line to look at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown
from supplyline.analyze.checks import Finding

BOUND_SHARE = 0.20  # a supply-side phase at 20% of step time or more is what bounds the step
OTHER_SHARE = 0.30


@dataclass
class Verdict:
    bound: P.Bound
    sentence: str


def verdict(b: Breakdown, findings: list[Finding]) -> Verdict:
    if b.steps == 0:
        return Verdict(
            "unknown",
            "No training steps were seen: no optimizer step, backward or DataLoader batch ran under the doctor.",
        )
    s = b.phase_share
    top = max(P.SUPPLY_SIDE, key=lambda phase: s.get(phase.name, 0.0))
    share = s.get(top.name, 0.0)
    if share >= BOUND_SHARE and top.bound is not None:
        first = findings[0] if findings else None
        gain = (
            f"; fixing it should give about {first.expected_speedup:.1f}× ({first.check})"
            if first and first.expected_speedup
            else ""
        )
        return Verdict(
            top.bound,
            f"{top.bound.capitalize()}-bound: {share * 100:.0f}% of each training step is spent {top.words}{gain}.",
        )
    if s[P.OTHER] >= OTHER_SHARE and s[P.OTHER] > s[P.COMPUTE]:
        where = b.top_lines[0] if b.top_lines else None
        at = f", most at {os.path.basename(where.file)}:{where.line} `{where.code}`" if where else ""
        return Verdict(
            "unknown",
            f"{s[P.OTHER] * 100:.0f}% of step time is in your own code outside the model, the loader and I/O{at}.",
        )
    return Verdict(
        "compute",  # the bound, not the phase: P.COMPUTE's bound is also "compute"
        f"Compute-bound: the supply line keeps up — {s[P.COMPUTE] * 100:.0f}% of step time is the model's own work "
        f"and the DataLoader wait is {s[P.DATA_WAIT] * 100:.0f}%.",
    )

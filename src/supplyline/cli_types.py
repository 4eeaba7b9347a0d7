"""argparse types for the numbers people type: every command reads numbers through these, so that
``nan``, ``inf`` and absurd values are refused the same way everywhere, in one line.

Why a shared type and not a check in each command: ``float("nan")`` parses, and every comparison
with NaN is False, so a check such as ``if budget <= 0`` lets NaN through to the arithmetic (a
NaN budget never runs out; a NaN threshold never fails a CI gate).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(
    kind: type[int] | type[float] = float,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    unit: str = "",
) -> Callable[[str], float]:
    """An argparse ``type=`` that accepts a finite ``kind`` in the given bounds.

    ``minimum``/``maximum`` are inclusive; ``above`` is an exclusive lower bound. The message
    names the rule; argparse adds the option's name in front.
    """
    suffix = f" {unit}" if unit else ""
    noun = "a whole number" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {noun}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be more than {above:g}{suffix}, not {text}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}{suffix}, not {text}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:g}{suffix}, not {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some of its own messages
    return parse


DAY_S = 86400.0
# Seconds a command may be asked to wait or measure: above zero, at most a day. A day is far past
# any real use and well inside what the standard library's timed waits accept (about 292 years
# for threading, but ``1e10`` overflows ``Event.wait`` on some builds).
seconds = number(float, above=0, maximum=DAY_S, unit="seconds")
positive_float = number(float, above=0)
fraction = number(float, minimum=0, maximum=10)
count = number(int, minimum=1)
count_or_zero = number(int, minimum=0)

"""When the script raises during a fix trial: say so, name what the trial had changed, and keep the
trial's figure out of the report.

A stretch cut short by an exception is not a measurement of the fix (its last step never closed,
and the fix may be what the script tripped over), so the trial that was running is reported with
no speed-up, and the sentence says which stretch ran and what it had changed. The job's own
outcome (the exception, its exit code) is left exactly as it was.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from supplyline.collect.events import TrialsInfo
from supplyline.doctor.trials import LOADER_FIXES, WHAT_CHANGES, TrialRunner, describe, loader_kind


@dataclass(frozen=True)
class TrialCrash:
    fix: str  # the check whose trial was running
    sentence: str


def during_trial(runner: TrialRunner, exception_type: str | None) -> TrialCrash | None:
    """The crash as the report words it, from the stretch that was running; None outside a trial."""
    seg = runner.segment
    if seg is None or not runner.active:
        return None
    fix = runner.plans[seg.plan].fix
    if fix in LOADER_FIXES:
        changed = WHAT_CHANGES["loader"].format(kind=loader_kind(runner.loader), settings=describe(seg.settings))
    else:
        changed = WHAT_CHANGES[fix]
    stretch = "with the fix applied" if seg.label == "B" else "of the unchanged job between fixed ones"
    sentence = (
        f"the script raised {exception_type or 'an exception'} during the fix trial ({fix}), in a stretch "
        f"{stretch}; the trial had changed this: {changed}. The trial's figure is not a measurement"
    )
    return TrialCrash(fix, sentence)


def void(info: TrialsInfo, crash: TrialCrash) -> None:
    """Take the crashed trial's figures out (its settings and steps stay, for the record)."""
    info.trials = [
        replace(
            t,
            trial_steps_per_s=None,
            measured_speedup=None,
            spread=[],
            note=f"not a measurement: {crash.sentence}",
        )
        if t.fix == crash.fix
        else t
        for t in info.trials
    ]


# torch re-raises a worker's exception in the training process with the worker's whole traceback in
# its message ("Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback ...").
_WORKER = re.compile(r"Caught (\w+) in DataLoader worker process (\d+)")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def one_line(exc: BaseException) -> str:
    """An exception as one line: a worker's re-raised one as what the worker raised, where, in your
    code (the last frame outside torch), never the 20 lines of the worker's traceback."""
    text = str(exc)
    found = _WORKER.search(text)
    if not found:
        first = text.strip().splitlines()[0] if text.strip() else ""
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else found.group(1)
    frames = [f for f in _FRAME.finditer(text) if f"{os.sep}torch{os.sep}" not in f.group(1)]
    where = (
        f" at {os.path.basename(frames[-1].group(1))}:{frames[-1].group(2)} in {frames[-1].group(3)}" if frames else ""
    )
    return f"DataLoader worker {found.group(2)} raised {last}{where}"

"""The one thing to do, from a Report: what to change, the change itself, the gain, the next command.

The one-screen summary (render/console.py) prints this and nothing that contradicts it: it is built
from the same top finding, the same trial and the same recommended settings as report.json, so the
worker count in the change is the trial's kept count whenever a trial measured one.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supplyline.analyze.checks import INPUT_CHECKS, LOOP_BY_HAND, NODES_BY_HAND, Finding
from supplyline.collect.events import LOADER_KEYS, is_loop

if TYPE_CHECKING:
    from supplyline.analyze.report import Report, Trial
    from supplyline.record import TargetInfo

# The DataLoader settings `run --apply` and the change can name, in the order they are written.
_NUMBERED = re.compile(r"\(\d\)\s+")
_CODE = ("+ ", "- ", "# ", "  ")
_METHOD = re.compile(r'method="(\w+)"')
_BATCH_FN = re.compile(r"wrap `(\w+)`")
_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


@dataclass(frozen=True)
class NextStep:
    check: str  # the finding it acts on
    do: str  # one sentence: what to change and why
    change: list[str] = field(default_factory=list)  # copy-pastable: "- old" / "+ new" / "# where" lines
    gain: str = ""  # the measured gain with its interval, the model's estimate beside it
    command: str = ""  # the next command to run ("" when none fits)
    by_hand: str = ""  # why no command applies it, when the change is the script's to make


def loader_changes(recommended: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    """The settings the report recommends changing: ``{key: new}`` where recommended ≠ seen."""
    out: dict[str, Any] = {}
    for key in LOADER_KEYS:
        entry = (recommended or {}).get(key)
        if entry and entry.get("recommended") is not None and entry["recommended"] != entry.get("seen"):
            out[key] = entry["recommended"]
    return out


def next_step(report: Report, report_dir: str | None = None) -> NextStep | None:
    """The top finding as one action; None when nothing was found."""
    if not report.findings:
        return None
    top = report.findings[0]
    trial = next(
        (t for t in report.trials if t.fix == top.check and (t.measured_speedup is not None or t.failed)), None
    )
    gain = _gain(top, trial)
    if top.check in INPUT_CHECKS or top.check == "storage":
        return _input_step(report, top, trial, gain, report_dir)
    switch = {"logging": "async_logging", "checkpoint": "async_save"}.get(top.check)
    declined = trial is not None and trial.decision != "faster"
    # No gain promised and none measured: the fix is to save less often, which no switch applies.
    if top.check == "checkpoint" and top.expected_speedup is None and trial is None:
        declined = True
    command = run_command(report.target, switch) if switch and not declined else ""
    if top.check == "transfer" and report.dataloader is not None and not report.dataloader.pin_memory:
        command = run_command(report.target, "pin_memory")
    do, change = split_fix(top.fix)
    return NextStep(top.check, do, change, gain, command)


def _input_step(report: Report, top: Finding, trial: Trial | None, gain: str, report_dir: str | None) -> NextStep:
    d = report.dataloader
    kind = d.loader_type if d is not None else "DataLoader"
    items = fix_items(top.fix)
    if trial is not None and trial.failed:
        # The workers failed on this job: the dataset comes first, and nothing is to be applied as is.
        do_text, snippet = split_fix(items[0])
        return NextStep(top.check, do_text, snippet, gain, "")
    if trial is not None and trial.decision != "faster":
        # More workers measured no gain on this job: the next item (cheaper samples) is the fix.
        do = items[1] if len(items) > 1 else items[0]
        shards = d.dataset_shards if d is not None else None
        tried = trial.settings.get("num_workers")
        # The shards are named only where they were the cap: the trial could not go past them.
        if len(items) > 1 and shards and isinstance(tried, int) and tried >= shards:
            do = (
                f"Not more workers than the dataset's {shards} shard(s) (past them a worker gets no data; "
                f"`to_iterable_dataset(num_shards=N)` makes more); {do[0].lower()}{do[1:]}"
            )
        elif len(items) > 1:
            do = f"Not more workers (the trial below measured them); {do[0].lower()}{do[1:]}"
        cmd = (d.preprocess_command if d is not None else None) or (d.tune_command if d is not None else None)
        return NextStep(top.check, _first_line(do), _code_lines(do), gain, cmd or "")
    changes = loader_changes(report.dataloader_recommended)
    do_text, snippet = split_fix(items[0])
    if d is not None and d.loader_module.startswith("torchdata.nodes"):
        return NextStep(top.check, do_text, _nodes_diff(d, changes, top.fix), gain, "", NODES_BY_HAND)
    if is_loop(d):
        return NextStep(top.check, do_text, _loop_diff(changes, top.fix), gain, "", LOOP_BY_HAND)
    if trial is not None:  # faster: `--apply auto` applies exactly what the trial kept
        command = run_command(report.target, "auto", report_dir) if report_dir else ""
    else:
        command = run_command(report.target, spec_text(changes)) if changes else ""
    change = snippet or (_loader_diff(kind, d, changes) if changes and d is not None else [])
    return NextStep(top.check, do_text, change, gain, command)


# What a DataLoader has when the script does not say: the "-" line shows only what the script set.
_DEFAULTS: dict[str, Any] = {"prefetch_factor": None, "persistent_workers": False, "pin_memory": False}


def _loader_diff(kind: str, d: Any, changes: dict[str, Any]) -> list[str]:
    said = [k for k in changes if k not in _DEFAULTS or getattr(d, k) != _DEFAULTS[k]]
    seen = ", ".join(f"{k}={getattr(d, k)}" for k in said)
    new = ", ".join(f"{k}={v}" for k, v in changes.items())
    return [f"- {kind}(..., {seen})" if seen else f"- {kind}(...)", f"+ {kind}(..., {new})"]


def _nodes_diff(d: Any, changes: dict[str, Any], fix: str) -> list[str]:
    """The change on the pipeline's own nodes: the mapper's workers and method, the prefetch depth."""
    found = _METHOD.search(fix)
    method = found.group(1) if found else d.worker_method
    out: list[str] = []
    workers = changes.get("num_workers", d.num_workers)
    if workers != d.num_workers or method != d.worker_method:
        out += [
            f'- ParallelMapper(..., num_workers={d.num_workers}, method="{d.worker_method}")',
            f'+ ParallelMapper(..., num_workers={workers}, method="{method}")',
        ]
    if "prefetch_factor" in changes:
        old = f"prefetch_factor={d.prefetch_factor}" if d.prefetch_factor else ""
        out += [
            f"- Prefetcher(..., {old})" if old else "- (no Prefetcher)",
            f"+ Prefetcher(..., prefetch_factor={changes['prefetch_factor']})",
        ]
    return out


def _loop_diff(changes: dict[str, Any], fix: str) -> list[str]:
    """A loop that builds its own batches, given workers: its batch function inside a DataLoader."""
    found = _BATCH_FN.search(fix)
    fn = found.group(1) if found else "get_batch"
    workers = changes.get("num_workers", 2)
    prefetch = changes.get("prefetch_factor", 4)
    return [
        "+ class Batches(torch.utils.data.IterableDataset):",
        "+     def __iter__(self):  # first seed its RNG from get_worker_info().id",
        "+         while True:",
        f"+             yield {fn}(...)",
        f"+ batches = iter(DataLoader(Batches(), batch_size=None, num_workers={workers},",
        f"+                           persistent_workers=True, prefetch_factor={prefetch}))",
        f"- x, y = {fn}(...)",
        "+ x, y = next(batches)",
    ]


def spec_text(changes: dict[str, Any]) -> str:
    """``num_workers=3,prefetch_factor=4,persistent_workers``: the changes as an ``--apply`` SPEC."""
    words = []
    for key, value in changes.items():
        if value is True:
            words.append(key)
        elif value is False:
            words.append(f"{key}=false")
        else:
            words.append(f"{key}={value}")
    return ",".join(words)


def run_command(target: TargetInfo, apply: str, report_dir: str | None = None) -> str:
    """``supplyline run --apply SPEC [--from DIR] SCRIPT ARGS`` for the job the report is about; ""
    for a job with no command line (``supplyline.watch`` in a library or a notebook)."""
    if target.kind not in ("script", "module") or not apply:
        return ""
    words = ["supplyline", "run", "--apply", apply]
    if report_dir:
        words += ["--from", _short_path(report_dir, target.cwd)]
    words += ["-m", target.name] if target.kind == "module" else [_short_path(target.name, target.cwd)]
    return shlex.join([*words, *target.args])


def _short_path(path: str, cwd: str) -> str:
    """The path as the user would type it from where the job ran: relative when it lies below."""
    try:
        rel = os.path.relpath(path, os.getcwd() if not cwd else cwd)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def fix_items(fix: str) -> list[str]:
    """A fix text's numbered items ("(1) … (2) …"), or the whole text as one item."""
    parts = [p.strip() for p in _NUMBERED.split(fix) if p.strip()]
    return parts or [fix]


def split_fix(fix: str) -> tuple[str, list[str]]:
    """The first item's words (up to its first sentence end) and the code lines it carries."""
    first = fix_items(fix)[0]
    return _first_line(first), _code_lines(first)


def _first_line(text: str) -> str:
    """The item's first sentence (a figure's dot, ``1.29×``, or a call's, ``torch.save``, is no end)."""
    line = text.split("\n", 1)[0].strip()
    return _SENTENCE_END.split(line, 1)[0].rstrip(".:") + "."


def _code_lines(text: str) -> list[str]:
    lines = text.split("\n")[1:]
    return [line for line in lines if line.startswith(_CODE)]


def _gain(top: Finding, trial: Trial | None) -> str:
    """``measured 1.29× (0.98–1.46×) in a 104-step trial: no clear difference; predicted 2.0×``."""
    predicted = f"the model predicted {top.gain_text()}" if top.expected_speedup else ""
    if trial is not None and trial.failed:
        return "none measured: the trial's workers failed (the fix says how)" + (
            f"; {predicted} once workers run" if predicted else ""
        )
    if trial is None or trial.measured_speedup is None:
        return f"{predicted} (no trial measured it)" if predicted else ""
    spread = f" (95% interval {trial.spread[0]:.2f}–{trial.spread[1]:.2f}×)" if len(trial.spread) == 2 else ""
    verdict = {
        "faster": "faster",
        "slower": "slower than unchanged: do not apply it",
        "no difference": "no clear difference from unchanged",
    }.get(trial.decision or "", "")
    what = ", ".join(f"{k}={v}" for k, v in trial.settings.items() if k != "persistent_workers")
    with_ = f" with {what}" if what else ""
    beside = f"; {predicted}" if predicted else ""
    return f"measured {trial.measured_speedup:.2f}×{spread} in a {trial.steps}-step trial{with_}: {verdict}{beside}"

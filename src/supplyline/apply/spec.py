"""What ``supplyline run --apply`` changes: parsed from ``--apply SPEC`` or taken from a saved result.

    num_workers=6,prefetch_factor=4,persistent_workers,pin_memory,async_save,async_logging

A bare flag means True; ``persistent_workers=false`` or ``pin_memory=0`` say False explicitly.
``auto`` takes the DataLoader settings a saved doctor report recommended (``report.json``'s
``dataloader_recommended``, plus async logging / saves where a logging / checkpoint finding was
made) or the configuration ``supplyline tune --json`` measured fastest.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from supplyline.analyze.trial_result import trial_decision
from supplyline.collect.events import LOADER_KEYS
from supplyline.errors import UserError

SWITCHES = ("async_save", "async_logging")
APPLY_TO = ("auto", "train", "all")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass
class ApplySpec:
    """The changes to make. ``loader`` holds only the DataLoader settings to override."""

    loader: dict[str, Any] = field(default_factory=dict)
    async_save: bool = False
    async_logging: bool = False
    source: str = "--apply"  # where the settings came from, for the start line

    def empty(self) -> bool:
        return not self.loader and not self.async_save and not self.async_logging

    def describe(self) -> str:
        """``num_workers=2, prefetch_factor=4, async_logging``: the changes, in SPEC's own words."""
        parts = [_word(k, v) for k, v in self.loader.items()]
        parts += [name for name in SWITCHES if getattr(self, name)]
        return ", ".join(parts) if parts else "nothing"


def _word(key: str, value: Any) -> str:
    if value is True:
        return key
    return f"{key}=false" if value is False else f"{key}={value}"


def parse_spec(text: str) -> ApplySpec:
    """``--apply`` text to an ApplySpec; anything unknown or malformed is one UserError line."""
    spec = ApplySpec()
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise UserError("--apply needs at least one setting, e.g. --apply num_workers=2,async_logging")
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key == "auto":
            raise UserError("--apply auto cannot be mixed with other settings; give one or the other")
        if key in ("num_workers", "prefetch_factor"):
            spec.loader[key] = _int(key, value, minimum=0 if key == "num_workers" else 1)
        elif key in ("persistent_workers", "pin_memory"):
            spec.loader[key] = _flag(key, value)
        elif key in SWITCHES:
            setattr(spec, key, _flag(key, value))
        else:
            known = ", ".join((*LOADER_KEYS, *SWITCHES))
            raise UserError(f"--apply: unknown setting '{key}' (known: {known}, or 'auto' with --from)")
    check_loader(spec.loader)
    return spec


def check_loader(loader: dict[str, Any]) -> None:
    """Torch's own rule, said before the job starts: prefetch and persistence need workers."""
    workers = loader.get("num_workers")
    if workers == 0 and (loader.get("prefetch_factor") or loader.get("persistent_workers")):
        raise UserError("--apply: prefetch_factor and persistent_workers need num_workers of 1 or more")


def _int(key: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UserError(f"--apply: {key} needs a whole number, e.g. {key}=4 (got '{value}')") from None
    if number < minimum:
        raise UserError(f"--apply: {key} must be at least {minimum}, not {number}")
    return number


def _flag(key: str, value: str) -> bool:
    if value == "" or value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise UserError(f"--apply: {key} is a switch: write '{key}' or '{key}=false' (got '{value}')")


def spec_from_saved(path: str) -> ApplySpec:
    """``--apply auto``: the settings a doctor report directory / ``report.json`` or a tune JSON recommends."""
    file = os.path.join(path, "report.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as fh:
            document = json.load(fh)
    except FileNotFoundError:
        raise UserError(f"--from {path}: no report.json or tune JSON there (run `supplyline doctor` first)") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"--from {file}: cannot read it as JSON ({exc})") from None
    if not isinstance(document, dict):
        raise UserError(f"--from {file}: not a supplyline report or tune result")
    if str(document.get("schema", "")).startswith("supplyline.tune/"):
        return _from_tune(document, file)
    if "report_version" in document:
        return _from_report(document, file)
    raise UserError(f"--from {file}: not a supplyline doctor report.json or `tune --json` output")


def _from_tune(document: dict[str, Any], file: str) -> ApplySpec:
    rec = document.get("recommended")
    if not isinstance(rec, dict):
        raise UserError(f"--from {file}: the tune run recommended nothing (no configuration completed)")
    loader = {k: rec[k] for k in LOADER_KEYS if rec.get(k) is not None}
    if not loader.get("num_workers"):
        loader = {k: v for k, v in loader.items() if k in ("num_workers", "pin_memory")}
    return ApplySpec(loader=loader, source=f"tune result {file}")


def _from_report(document: dict[str, Any], file: str) -> ApplySpec:
    recommended = document.get("dataloader_recommended") or {}
    loader: dict[str, Any] = {}
    for key in LOADER_KEYS:
        entry = recommended.get(key)
        if (
            isinstance(entry, dict)
            and entry.get("recommended") is not None
            and entry["recommended"] != entry.get("seen")
        ):
            loader[key] = entry["recommended"]
    checks = {f.get("check") for f in document.get("findings") or [] if isinstance(f, dict)}
    declined: list[str] = []
    for trial in document.get("trials") or []:
        # The doctor's trial measured the fix on the job itself: its answer beats the table's guess,
        # and a trial that did not measure "faster" (slower, or no clear difference) is not applied.
        if isinstance(trial, dict) and trial.get("failed") and trial.get("fix") in ("dataloader", "storage"):
            declined.append(f"its {trial['fix']} trial's workers failed ({trial['failed']})")
            loader = {}
            continue
        if not isinstance(trial, dict) or not isinstance(trial.get("measured_speedup"), (int, float)):
            continue
        spread = trial.get("spread")
        decision = trial_decision(float(trial["measured_speedup"]), spread if isinstance(spread, list) else None)
        settings = trial.get("settings") or {}
        if decision != "faster" and trial.get("fix") in ("dataloader", "storage", "checkpoint", "logging"):
            declined.append(f"its {trial['fix']} trial measured {float(trial['measured_speedup']):.2f}×: {decision}")
        if trial.get("fix") in ("dataloader", "storage"):
            if decision == "faster" and isinstance(settings, dict):
                loader = {k: settings[k] for k in LOADER_KEYS if k in settings}
            else:
                loader = {}
        elif trial.get("fix") in ("checkpoint", "logging") and decision != "faster":
            checks.discard(trial["fix"])
    spec = ApplySpec(
        loader=loader,
        async_save="checkpoint" in checks,
        async_logging="logging" in checks,
        source=f"doctor report {file}",
    )
    if spec.empty():
        why = f" ({'; '.join(declined)})" if declined else ""
        raise UserError(f"--from {file}: the report recommends no change this command can apply{why}")
    return spec

"""Shared test helpers. Area-specific fixtures live in each area's own conftest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

# A shell starts a background job (`pytest &`, nohup, some CI runners) with SIGINT ignored, and an
# ignored signal stays ignored across exec: every child the Ctrl-C tests start would then shrug off
# their SIGINT. A handled signal is reset to the default on exec, so handling it here restores Ctrl-C
# for the children (and for pytest itself).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_cli(
    args: Sequence[str],
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m supplyline ARGS`` in a real child process and capture its output.

    The timeout guards against hangs only; no test asserts on wall-clock time.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "supplyline", *args],
        cwd=cwd,
        env=full_env,
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _no_trial(args: Sequence[str]) -> list[str]:
    return [] if "--try-steps" in args or "--no-try" in args else ["--no-try"]


@pytest.fixture
def no_trial():
    """``--no-try`` for a doctor run unless the test sets the trial up itself (``--try-steps``): the fix
    trial adds ~1.5 s to a planted job's run, and only tests/doctor/test_doctor_trials.py looks at it."""
    return _no_trial


@pytest.fixture
def cli():
    return run_cli


# -- the words-follow-figures and one-screen invariants, held by every doctor run of a planted job --

SCREEN_COLUMNS = 100
SCREEN_LINES = 30
SUMMARY_RULE = "supplyline doctor —"


def summary_block(console: str) -> list[str]:
    """The summary's lines, from its rule to the line that names the report files (or the end)."""
    lines = console.splitlines()
    start = next(i for i, line in enumerate(lines) if SUMMARY_RULE in line)
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("Everything else")), len(lines) - 1)
    return lines[start : end + 1]


def check_one_screen(report: dict[str, Any], console: str) -> None:
    """The one-screen summary: at most 30 lines at 100 columns (a line longer than the screen counts
    as the lines it wraps to), one fix that matches the trial, no note about a share it cannot tell."""
    import math
    import re

    block = summary_block(console)
    height = sum(max(1, math.ceil(len(line) / SCREEN_COLUMNS)) for line in block)
    assert height <= SCREEN_LINES, f"{height} lines:\n" + "\n".join(block)
    text = "\n".join(block)
    assert "too few to tell" not in text, text  # a sampling caveat belongs to --details, beside its rows
    # the step time beside the rate is the one the rate is made of (17 ms = 58.7 steps/s, not a 3.3 ms median)
    for ms, rate in re.findall(r"^Step (\d+\.\d+) ms.*? · (\d+\.\d+) steps/s", text, re.M):
        assert abs(float(ms) * float(rate) / 1000 - 1) < 0.25 or float(ms) < 1, (ms, rate, text)
    loader = next(
        (t for t in report["trials"] if t["fix"] in ("dataloader", "storage") and t["measured_speedup"] is not None),
        None,
    )
    top = report["findings"][0] if report["findings"] else None
    if top is not None and top["check"] == "checkpoint" and top["fix"].startswith("No gain"):
        assert "AsyncCheckpointer" not in text and "--apply async_save" not in text, text
    if top is None:
        assert "Fix (" not in text, text
        return
    assert f"Fix ({top['check']})" in text, text
    if loader is None or loader["fix"] != top["check"]:
        return
    fix = "\n".join(line for line in block if line.startswith(("Fix", "  +")) or "Run:" in line)
    kept = loader["settings"]["num_workers"]
    assert f"measured {loader['measured_speedup']:.2f}×" in text, text  # the Gain line quotes the trial
    if _decision(loader) == "faster":  # the change is what the trial kept
        assert f"num_workers={kept}" in fix and "--apply auto" in text, text
        assert all(int(n) == kept for n in re.findall(r"num_workers=(\d+)", fix)), fix
    else:  # slower or no difference: the one fix is not more workers
        assert not re.search(r"\+ .*num_workers=", fix) and "--apply auto" not in text, text


def _decision(trial: dict[str, Any]) -> str | None:
    """The trial's answer as the report reads it (the interval past 1.0 and the figure past ±5%)."""
    from supplyline.analyze.trial_result import trial_decision

    return trial_decision(trial["measured_speedup"], trial["spread"])


def _check_words_follow_figures(report: dict[str, Any], console: str) -> None:
    """No sentence contradicts a figure beside it: every quoted interval holds its point, and where a
    loader trial measured faster, the fix text and the recommended settings name what it kept."""
    import re

    # an input-bound verdict always comes with the finding that says what to do about it
    assert report["verdict"]["bound"] != "input" or report["findings"], (report["verdict"], console)
    texts = [report["verdict"]["sentence"], console.replace("\n", " ")]
    texts += [f["evidence"] + " " + f["fix"] for f in report["findings"]]
    quoted = 0
    for text in texts:
        for point, lo, hi in re.findall(
            r"measured (\d+\.\d+)×(?:(?!measured).){0,240}?95% interval (\d+\.\d+)–(\d+\.\d+)×", text
        ):
            assert float(lo) <= float(point) <= float(hi), (point, lo, hi, text)
            quoted += 1
    for t in report["trials"]:
        if t["measured_speedup"] is not None and len(t["spread"]) == 2:
            assert t["spread"][0] <= t["measured_speedup"] <= t["spread"][1], t
    failed = next((t for t in report["trials"] if t["fix"] in ("dataloader", "storage") and t.get("failed")), None)
    if failed is not None:  # workers that failed are never the advice: no change applied, no gain promised as is
        assert report["dataloader_recommended"]["num_workers"]["recommended"] == _seen_workers(report)
        assert "--apply" not in console and "Original Traceback" not in console, console
        top = next((f for f in report["findings"] if f["check"] == failed["fix"]), None)
        assert top is None or top["fix"].removeprefix("(1) ").startswith(
            "Make the dataset work in DataLoader workers"
        ), top
        return
    loader = next(
        (t for t in report["trials"] if t["fix"] in ("dataloader", "storage") and t["measured_speedup"] is not None),
        None,
    )
    if loader is None or not report["findings"]:
        return
    assert quoted, "a measured trial is quoted with its interval"
    workers = loader["settings"]["num_workers"]
    top = next((f for f in report["findings"] if f["check"] in ("dataloader", "storage")), None)
    faster = _decision(loader) == "faster"
    if faster and top is not None:
        assert f"num_workers={workers}" in top["fix"], (workers, top["fix"])
        assert report["dataloader_recommended"]["num_workers"]["recommended"] == workers
        for past in re.findall(r"[Pp]ast (\d+) workers? the rate is capped", top["fix"]):
            assert int(past) >= workers, top["fix"]
    elif top is not None:
        assert report["dataloader_recommended"]["num_workers"]["recommended"] == _seen_workers(report)
        assert "No gain measured" in top["fix"], top["fix"]


@pytest.fixture
def words_follow_figures() -> Callable[[dict[str, Any], str], None]:
    """The consistency check as a fixture: test folders each have a conftest, so importing it by name is
    ambiguous (the first one imported wins)."""
    return _check_words_follow_figures


@pytest.fixture
def one_screen() -> Callable[[dict[str, Any], str], None]:
    return check_one_screen


def _seen_workers(report: dict[str, Any]) -> Any:
    return report["dataloader_recommended"]["num_workers"]["seen"]

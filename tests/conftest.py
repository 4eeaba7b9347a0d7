"""Shared test helpers. Area-specific fixtures live in each area's own conftest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

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

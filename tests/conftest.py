"""Shared test helpers. Area-specific fixtures live in each area's own conftest."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import pytest


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


@pytest.fixture
def cli():
    return run_cli

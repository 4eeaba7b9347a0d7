"""Fixtures for the apply tests: the planted jobs and `supplyline run` in a real child process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ZOO = os.path.join(os.path.dirname(__file__), "zoo")


@pytest.fixture
def zoo_path():
    return lambda name: os.path.join(ZOO, name)


@pytest.fixture
def python():
    """The plain-python run of a script: the reference `supplyline run` must match."""

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)

    return run

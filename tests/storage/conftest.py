"""Fixtures for the storage tests: small file systems to fill."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def small_mount(tmp_path) -> Iterator:
    """Mount a tmpfs of the given options under tmp_path (we run as root in CI); skip if impossible."""
    mounted: list[str] = []

    def mount(options: str) -> str:
        target = str(tmp_path / f"mnt{len(mounted)}")
        os.makedirs(target)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", target], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs (needs root): {done.stderr.strip() or done.returncode}")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", target], capture_output=True)

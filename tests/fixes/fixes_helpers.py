"""Helpers for the fixes tests: run a small Python script in a real child process.

Imported as ``fixes_helpers`` (pytest puts this folder on sys.path: it has no __init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_script(directory: str, source: str, name: str = "child.py") -> str:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(textwrap.dedent(source))
    return path


def start_child(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, script, *args], env=child_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def run_child(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run to the end; the timeout is a hang guard, not an assertion."""
    return subprocess.run(
        [sys.executable, script, *args], env=child_env(), text=True, capture_output=True, timeout=timeout
    )


def read_until(proc: subprocess.Popen[str], prefix: str) -> str:
    """Read the child's stdout up to the first line starting with ``prefix``."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.strip()
    proc.wait(timeout=60)
    raise AssertionError(
        f"child ended before printing {prefix!r}: rc={proc.returncode}, "
        f"stderr={proc.stderr.read() if proc.stderr else ''}"
    )

"""Helpers for the fault suite: real child processes, real signals, real broken files and full disks.

Imported as ``faults_helpers`` (a module of its own: several test folders have a conftest, and
their names must not clash)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
HANG_GUARD_S = 240  # a subprocess timeout against hangs, never a performance assertion


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def supplyline(args: Sequence[str], cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m supplyline ARGS`` in a real child process, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "supplyline", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def start_supplyline(args: Sequence[str], cwd: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "supplyline", *args],
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def write_script(directory: str, source: str, name: str = "child.py") -> str:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(textwrap.dedent(source))
    return path


def run_script(script: str, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, script, *args], cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=HANG_GUARD_S
    )


def start_script(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, script, *args], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def assert_one_line(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The fault was reported as one clear line on stderr, with ``code``, and no traceback."""
    err = done.stderr.strip()
    assert done.returncode == code, f"exit {done.returncode}, stderr: {done.stderr}"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert err and len(err.splitlines()) == 1, f"expected one line, got: {done.stderr!r}"
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def wait_for(condition: Callable[[], bool], what: str, guard_s: float = HANG_GUARD_S) -> None:
    """Poll until ``condition`` holds (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + guard_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


@contextlib.contextmanager
def small_tmpfs(directory: str, size: str = "1m") -> Iterator[str]:
    """A real, small file system to fill (``mount -t tmpfs``, we run as root); skip with the reason
    when this machine does not allow mounting."""
    os.makedirs(directory, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", directory], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or f'mount exited {done.returncode}'}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", directory], capture_output=True)


def files_under(root: str) -> list[str]:
    """Every entry below ``root`` (hidden ones too), relative, sorted: to show nothing was left behind."""
    found = []
    for base, dirs, files in os.walk(root):
        for name in dirs + files:
            found.append(os.path.relpath(os.path.join(base, name), root))
    return sorted(found)

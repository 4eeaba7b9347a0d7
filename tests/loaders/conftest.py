"""The loaders' tests run the doctor on a planted job the same way: one helper, as a fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

DoctorRun = tuple[subprocess.CompletedProcess[str], dict[str, Any]]


@pytest.fixture
def doctor_job(tmp_path: Any) -> Callable[..., DoctorRun]:
    """``doctor_job(JOB, *args, flags=...)``: ``supplyline doctor --out REPORT --steps 30 FLAGS JOB ARGS``
    in ``tmp_path`` at 100 columns; the process (it must exit 0) and its report.json."""

    def run(job: str, *args: str, flags: Sequence[str] = ("--what-if-steps", "10")) -> DoctorRun:
        out = str(tmp_path / "report")
        proc = subprocess.run(
            [sys.executable, "-m", "supplyline", "doctor", "--out", out, "--steps", "30", *flags, job, *args],
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "100"},
        )
        assert proc.returncode == 0, proc.stderr
        with open(os.path.join(out, "report.json")) as fh:
            return proc, json.load(fh)

    return run

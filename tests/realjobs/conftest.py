"""Fixtures for the real-job tests: run the doctor on a zoo script, read its record and report."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

ZOO = os.path.join(os.path.dirname(__file__), "zoo")


class DoctorRun:
    def __init__(self, proc: Any, out: str) -> None:
        self.proc = proc
        self.out = out

    def _load(self, name: str) -> dict[str, Any]:
        with open(os.path.join(self.out, name)) as fh:
            return json.load(fh)

    @property
    def record(self) -> dict[str, Any]:
        return self._load("record.json")

    @property
    def report(self) -> dict[str, Any]:
        return self._load("report.json")


@pytest.fixture
def zoo_path():
    return lambda name: os.path.join(ZOO, name)


@pytest.fixture
def doctor(tmp_path, cli, no_trial, words_follow_figures, one_screen):
    """The doctor on a real-world-shaped job at 100 columns, held to the one-screen invariants."""

    def run(*args: str, env: dict[str, str] | None = None) -> DoctorRun:
        out = str(tmp_path / "report")
        proc = cli(
            ["doctor", "--out", out, *no_trial(args), *args], cwd=str(tmp_path), env={"COLUMNS": "100", **(env or {})}
        )
        result = DoctorRun(proc, out)
        if os.path.exists(os.path.join(out, "report.json")) and "supplyline doctor —" in proc.stderr:
            words_follow_figures(result.report, proc.stderr)
            one_screen(result.report, proc.stderr)
        return result

    return run

from __future__ import annotations

import json
import os
from typing import Any

import pytest

ZOO = os.path.join(os.path.dirname(__file__), "zoo")


def zoo(name: str) -> str:
    return os.path.join(ZOO, name)


class DoctorRun:
    def __init__(self, proc: Any, out: str) -> None:
        self.proc = proc
        self.out = out

    @property
    def report(self) -> dict[str, Any]:
        with open(os.path.join(self.out, "report.json")) as fh:
            return json.load(fh)

    @property
    def record(self) -> dict[str, Any]:
        with open(os.path.join(self.out, "record.json")) as fh:
            return json.load(fh)


@pytest.fixture
def zoo_path():
    return zoo


@pytest.fixture
def doctor(tmp_path, cli, no_trial, words_follow_figures, one_screen):
    """Run the doctor on a planted job at 100 columns; every run that printed its summary is held to
    the one-screen invariants (``check_one_screen``) and the words-follow-figures check."""

    def run(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> DoctorRun:
        out = str(tmp_path / "report")
        proc = cli(
            ["doctor", "--out", out, *no_trial(args), *args],
            cwd=cwd or str(tmp_path),
            env={"COLUMNS": "100", **(env or {})},
        )
        result = DoctorRun(proc, out)
        if os.path.exists(os.path.join(out, "report.json")) and "supplyline doctor —" in proc.stderr:
            words_follow_figures(result.report, proc.stderr)
            if "--details" not in args:
                one_screen(result.report, proc.stderr)
        return result

    return run

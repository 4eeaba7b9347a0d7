"""The doctor reports the logging and checkpoint findings on the benchmark's original loops, and no
longer on the versions that apply supplyline.fixes."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "fixes.py")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_fixes", BENCH)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["bench_fixes"] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("loop,steps", [("logging", 60), ("checkpoint", 24)])
def test_doctor_sees_the_fix(tmp_path, loop, steps):
    bench = _bench()
    scripts = bench.build_scripts(str(tmp_path))[loop]
    before = [f for f in bench.doctor_findings(scripts["before"], steps, str(tmp_path)) if f["check"] == loop]
    after = [f for f in bench.doctor_findings(scripts["after"], steps, str(tmp_path)) if f["check"] == loop]
    assert before and before[0]["severity"] in ("high", "medium")
    assert not [f for f in after if f["severity"] in ("high", "medium")]

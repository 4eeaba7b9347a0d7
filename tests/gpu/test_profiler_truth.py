"""The profiler-side truth of the GPU checks, on hand-built traces and on a real CPU profiler trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "benchmarks", "gpu")
sys.path.insert(0, BENCH)

from profiler_truth import idle_share_from_trace  # noqa: E402


def ev(name: str, cat: str, ts: float, dur: float) -> dict[str, object]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur}


def test_idle_share_is_one_minus_the_union_of_gpu_activity_over_the_window() -> None:
    trace = {
        "traceEvents": [
            ev("step", "user_annotation", 0, 100),  # skipped as warm-up
            ev("step", "user_annotation", 100, 100),
            ev("step", "user_annotation", 200, 100),
            ev("gemm", "kernel", 90, 30),  # 100..120 inside the window
            ev("gemm", "kernel", 110, 20),  # overlaps: union 100..130
            ev("h2d", "gpu_memcpy", 200, 50),
            ev("zero", "gpu_memset", 290, 40),  # clipped at 300
            ev("cpu op", "cpu_op", 100, 200),
        ]
    }
    res = idle_share_from_trace(trace, "step", skip_first=1)
    assert res["wall_ms"] == pytest.approx(0.2)
    assert res["gpu_busy_ms"] == pytest.approx((30 + 50 + 10) / 1000)
    assert res["idle_share"] == pytest.approx(1 - 90 / 200)


def test_missing_annotations_say_so() -> None:
    assert idle_share_from_trace({"traceEvents": []}, "step")["idle_share"] is None


@pytest.mark.slow
def test_planted_jobs_run_on_cpu_and_parse_a_real_profiler_trace(tmp_path: object) -> None:
    out = os.path.join(str(tmp_path), "p.json")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "src"))
    for job in ("starved",):  # one planted job is enough to show both paths parse on CPU
        for flag in ("--profile", "--timeline"):
            subprocess.run(
                [
                    sys.executable,
                    os.path.join(BENCH, "planted.py"),
                    "--job",
                    job,
                    "--device",
                    "cpu",
                    "--steps",
                    "12",
                    flag,
                    out,
                    "--scratch",
                    str(tmp_path),
                ],
                check=True,
                env=env,
                timeout=300,
            )
            res = json.load(open(out))
            assert res["job"] == job and res["step_ms_median"] > 0
            if flag == "--profile":
                assert res["profiler"]["steps"] == 7 and res["profiler"]["idle_share"] == pytest.approx(1.0)
            else:
                assert res["timeline"]["available"] is False and "CUDA is not available" in res["timeline"]["note"]

"""GPU idle on the terminal, the HTML page and the trace, from a hand-built CUDA record."""

from __future__ import annotations

import io
import json

from handmade import record, timeline
from rich.console import Console

from supplyline import phases as P
from supplyline.analyze.report import build_report
from supplyline.render.console import render_summary
from supplyline.render.files import RENDERERS
from supplyline.render.html import build_html
from supplyline.render.trace import build_trace


def starved() -> tuple[object, object]:
    tl = timeline(20, 0.010, busy=(0.006, 0.0095), queued=0.0095, phases=[(P.DATA_WAIT, 0.0, 0.006)])
    rec = record(20, 0.010, data_wait=0.006, gpu_timeline=tl)
    return rec, build_report(rec)


def text(report: object) -> str:
    buf = io.StringIO()
    render_summary(report, None, Console(file=buf, width=140, color_system=None), details=True)  # type: ignore[arg-type]
    return buf.getvalue()


def test_console_shows_gpu_idle_beside_the_cpu_split() -> None:
    _, rep = starved()
    out = text(rep)
    assert "gpu idle" in out and "(GPU side, overlaps the rows above)" in out
    assert "GPU idle (CUDA events, 19 steps): 65% of the time — waiting for data wait 60%, other 5%" in out
    assert "data wait: CPU side 60% of step time · GPU idle for it 60%" in out


def test_console_without_gpu_marks_has_no_gpu_idle_row() -> None:
    out = text(build_report(record(20, 0.010, data_wait=0.006)))
    assert "gpu idle" not in out.lower()


def test_html_has_the_gpu_idle_section_and_the_phase_table_entry() -> None:
    rec, rep = starved()
    page = build_html(rep, rec)  # type: ignore[arg-type]
    assert 'id="gpu-idle"' in page and "65.0%" in page
    assert P.BY_NAME[P.GPU_IDLE].colour in page  # swatch and the embedded phase table
    plain = build_html(build_report(record(20, 0.010, data_wait=0.006)), record(20, 0.010, data_wait=0.006))
    assert 'id="gpu-idle"' not in plain


def test_trace_has_a_gpu_track_with_real_positions() -> None:
    rec, rep = starved()
    trace = json.loads(RENDERERS["trace"].build(rep, rec))  # type: ignore[arg-type]
    work = [e for e in trace["traceEvents"] if e.get("name") == "GPU work"]
    assert len(work) == 19 and work[0]["ts"] == 16000 and work[0]["dur"] == 3500  # step 1: 10 ms + 6 ms
    idle = [e for e in trace["traceEvents"] if e.get("name") == "GPU idle (ms per step)"]
    assert len(idle) == 19 and abs(idle[0]["args"]["idle"] - 6.5) < 1e-6
    assert not [e for e in build_trace(rec, rep.breakdown)["traceEvents"] if e.get("name") == "GPU work"]  # type: ignore[attr-defined]


def test_the_gpu_benchmark_summary_reads_the_doctor_report(tmp_path) -> None:
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "benchmarks" / "gpu" / "summarize.py"
    spec = importlib.util.spec_from_file_location("gpu_summarize", path)
    assert spec is not None and spec.loader is not None
    summarize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summarize)
    _, rep = starved()
    (tmp_path / "doctor-starved").mkdir()
    (tmp_path / "doctor-starved" / "report.json").write_text(RENDERERS["json"].build(rep, None))  # type: ignore[arg-type]
    row = summarize.job_summary(str(tmp_path), "starved")
    assert abs(row["idle_share_doctor"] - 0.65) < 1e-9 and row["verdict_doctor"] == "input"
    assert row["gpu_bound_doctor"] == "input" and row["gpu_idle_by_phase_share_doctor"][P.DATA_WAIT] > 0.59

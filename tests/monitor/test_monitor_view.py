"""The terminal views render real samples: cores, memory, disks, GPU line, processes, summary."""

from __future__ import annotations

import io
import time

from rich.console import Console

from supplyline.collect.sampler import Monitor
from supplyline.render.monitor_view import MonitorLiveView, render_monitor_summary, render_sample


def _real_sample():
    with Monitor(interval=0.1, log=None) as monitor:
        while monitor.sample_count < 2:
            time.sleep(0.05)
    return monitor


def _text(renderable) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=140, force_terminal=False).print(renderable)
    return buffer.getvalue()


def test_live_frame_shows_every_section() -> None:
    monitor = _real_sample()
    sample = monitor.samples[-1]
    text = _text(render_sample(sample, "no NVIDIA GPU/NVML (test)", "PID 1"))
    assert "core 0" in text and f"core {len(sample.cpu.per_core_busy_pct) - 1}" in text
    assert "Memory used" in text and "page cache" in text
    for disk in sample.disks:
        assert disk.device in text
    assert text.count("no NVIDIA GPU/NVML") == 1
    assert str(sample.processes[0].pid) in text and "root" in text


def test_summary_table_and_gpu_line_once() -> None:
    monitor = _real_sample()
    buffer = io.StringIO()
    render_monitor_summary(monitor.summary(), "no NVIDIA GPU/NVML (test)", "me", Console(file=buffer, width=120))
    text = buffer.getvalue()
    assert "cpu.busy_pct" in text and "tree.rss_bytes" in text and "p95" in text
    assert "memory.total_bytes" not in text  # constant: not a statistic
    assert text.count("no NVIDIA GPU/NVML") == 1


def test_live_view_is_off_without_a_terminal() -> None:
    view = MonitorLiveView("host")
    view.console = Console(file=io.StringIO(), force_terminal=False)
    view.enabled = view.console.is_terminal
    with view:
        view.update(_real_sample().samples[-1])
    assert not view.enabled and view.console.file.getvalue() == ""  # type: ignore[attr-defined]

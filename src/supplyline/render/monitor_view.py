"""Terminal views of the monitor (rich): a live panel refreshed in place on stderr, and the summary.

The live view only draws when stderr is a terminal; it is transient, so when it ends the summary
takes its place and nothing (the GPU line included) is said twice.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from supplyline.collect.samples import Sample
from supplyline.collect.summary import MetricStats, Summary
from supplyline.console import stderr_console, stdout_console
from supplyline.units import human_bytes

_BAR_WIDTH = 20
_MAX_PROCESSES = 12


def bar(pct: float, width: int = _BAR_WIDTH) -> Text:
    """A horizontal bar for a 0..100 share, green / yellow / red as it fills."""
    filled = max(0, min(width, round(pct / 100.0 * width)))
    style = "green" if pct < 60 else "yellow" if pct < 90 else "red"
    return Text("█" * filled, style=style) + Text("·" * (width - filled), style="dim")


def render_sample(sample: Sample, gpu_status: str, watched: str) -> RenderableType:
    """One frame of the live view: cores, memory, disks, GPUs and the process tree."""
    parts: list[RenderableType] = []
    cpu = sample.cpu
    head = Text.assemble(
        (f"supplyline monitor · {watched} · {sample.elapsed_s:6.1f} s\n", "bold"),
        f"CPU {cpu.busy_pct:5.1f}% busy  user {cpu.user_pct:.1f}%  system {cpu.system_pct:.1f}%"
        f"  iowait {cpu.iowait_pct:.1f}%  load {cpu.load_1m:.2f} {cpu.load_5m:.2f} {cpu.load_15m:.2f}",
    )
    parts.append(head)
    cores = Table.grid(padding=(0, 1))
    columns = 2 if len(cpu.per_core_busy_pct) > 8 else 1
    for _ in range(columns):
        cores.add_column(justify="right")
        cores.add_column()
        cores.add_column(justify="right")
    row: list[Any] = []
    for i, pct in enumerate(cpu.per_core_busy_pct):
        row += [f"core {i}", bar(pct), f"{pct:5.1f}%"]
        if len(row) == 3 * columns:
            cores.add_row(*row)
            row = []
    if row:
        cores.add_row(*row, *[""] * (3 * columns - len(row)))
    parts.append(cores)
    mem = sample.memory
    parts.append(
        Text(
            f"Memory used {human_bytes(mem.used_bytes)} of {human_bytes(mem.total_bytes)}, "
            f"available {human_bytes(mem.available_bytes)}, page cache {human_bytes(mem.page_cache_bytes)}, "
            f"swap {human_bytes(mem.swap_used_bytes)} (in {human_bytes(mem.swap_in_bytes_per_s)}/s, "
            f"out {human_bytes(mem.swap_out_bytes_per_s)}/s)"
        )
    )
    parts.append(_disk_table(sample))
    parts.append(_gpu_part(sample, gpu_status))
    if sample.processes:
        parts.append(_process_table(sample))
    return Group(*parts)


def _disk_table(sample: Sample) -> Table:
    table = Table(title=None, box=None, header_style="bold", pad_edge=False)
    for name in ("disk", "r/s", "w/s", "rMB/s", "wMB/s", "r_await ms", "w_await ms", "aqu-sz", "%util", ""):
        table.add_column(name, justify="left" if name == "disk" else "right")
    for d in sample.disks:
        table.add_row(
            d.device,
            f"{d.reads_per_s:.0f}",
            f"{d.writes_per_s:.0f}",
            f"{d.read_mb_per_s:.1f}",
            f"{d.write_mb_per_s:.1f}",
            f"{d.r_await_ms:.2f}",
            f"{d.w_await_ms:.2f}",
            f"{d.aqu_sz:.2f}",
            f"{d.util_pct:.1f}",
            bar(d.util_pct, 10),
        )
    return table


def _gpu_part(sample: Sample, gpu_status: str) -> RenderableType:
    if gpu_status or not sample.gpus:
        return Text(f"GPU: {gpu_status or 'none'}", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("gpu", "util", "", "mem util", "memory", "PCIe rx/tx MB/s", "SM MHz", "power W", "temp °C"):
        table.add_column(name, justify="left" if name == "gpu" else "right")
    for g in sample.gpus:
        table.add_row(
            f"{g.index} {g.name}",
            _opt(g.util_pct, "{:.0f}%"),
            bar(g.util_pct or 0.0, 10),
            _opt(g.memory_util_pct, "{:.0f}%"),
            f"{_opt(g.memory_used_bytes, human_bytes)} / {_opt(g.memory_total_bytes, human_bytes)}",
            f"{_opt(g.pcie_rx_mb_per_s, '{:.0f}')} / {_opt(g.pcie_tx_mb_per_s, '{:.0f}')}",
            _opt(g.sm_clock_mhz, "{}"),
            _opt(g.power_w, "{:.0f}"),
            _opt(g.temperature_c, "{}"),
        )
    return table


def _process_table(sample: Sample) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("pid", "role", "name", "cpu %", "", "rss", "state", "read/s", "write/s"):
        table.add_column(name, justify="left" if name in ("role", "name", "state") else "right")
    procs = sorted(sample.processes, key=lambda p: (p.role != "root", -p.cpu_pct))
    for p in procs[:_MAX_PROCESSES]:
        table.add_row(
            str(p.pid),
            p.role,
            p.name,
            f"{p.cpu_pct:.0f}",
            bar(min(p.cpu_pct, 100.0), 10),
            human_bytes(p.rss_bytes),
            p.status,
            _opt(p.read_bytes_per_s, human_bytes),
            _opt(p.write_bytes_per_s, human_bytes),
        )
    if len(procs) > _MAX_PROCESSES:
        table.add_row("", "", f"… {len(procs) - _MAX_PROCESSES} more", *[""] * 6)
    return table


def _opt(value: Any, fmt: Any) -> str:
    if value is None:
        return "n/a"
    return str(fmt(value) if callable(fmt) else fmt.format(value))


class MonitorLiveView:
    """Redraws the latest sample in place on stderr; does nothing when stderr is not a terminal."""

    def __init__(self, watched: str, gpu_status: str = "", refresh_per_second: float = 4.0) -> None:
        self.watched = watched
        self.gpu_status = gpu_status
        self.console = stderr_console()
        self.enabled = self.console.is_terminal
        self._live: Live | None = None
        self._shown: Sample | None = None
        self._refresh = refresh_per_second

    def __enter__(self) -> MonitorLiveView:
        if self.enabled:
            self._live = Live(
                Text("waiting for the first sample…"),
                console=self.console,
                transient=True,
                auto_refresh=False,
                refresh_per_second=self._refresh,
            )
            self._live.start()
        return self

    def update(self, sample: Sample | None) -> None:
        if self._live is None or sample is None or sample is self._shown:
            return
        self._shown = sample
        self._live.update(render_sample(sample, self.gpu_status, self.watched), refresh=True)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


# Metrics that do not change during a run, shown once in the heading rather than as statistics.
_STATIC = ("memory.total_bytes", "memory_total_bytes")


def render_monitor_summary(summary: Summary, gpu_status: str, title: str, console: Console | None = None) -> None:
    """Print the summary table (mean, p95, max per metric) and the GPU status line, once."""
    console = console or stdout_console()
    table = Table(
        title=f"{title}: {summary.sample_count} samples over {summary.duration_s:.1f} s",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("metric")
    for name in ("mean", "p95", "max"):
        table.add_column(name, justify="right")
    for m in summary.metrics.values():
        if m.name.startswith("proc.") or m.name.endswith(_STATIC):
            continue
        table.add_row(m.name, *(_format(m, v) for v in (m.mean, m.p95, m.max)))
    console.print(table)
    if gpu_status:
        console.print(f"GPU: {gpu_status}")


def _format(metric: MetricStats, value: float) -> str:
    if metric.unit == "B":
        return human_bytes(value)
    if metric.unit == "B/s":
        return f"{human_bytes(value)}/s"
    return f"{value:.2f} {metric.unit}".rstrip()

"""Terminal output of ``supplyline disk`` (rich). The data side lives in diagnose/verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from supplyline.storage.disk.diagnose import DiskReport
from supplyline.storage.disk.verdict import verdict
from supplyline.storage.files import describe_unreadable
from supplyline.units import human_bytes


def render_survey(report: DiskReport, console: Console) -> None:
    inv, loc = report.inventory, report.location
    console.print(f"[bold]Dataset[/bold] {escape(inv.root)}")
    console.print(
        f"  files: {inv.files:,}   total: {human_bytes(inv.total_bytes)}   mean: "
        f"{human_bytes(inv.mean_file_bytes)}   median: {human_bytes(inv.median_file_bytes)}   "
        f"largest: {human_bytes(inv.largest_file_bytes)}"
    )
    fpd = inv.files_per_directory
    console.print(
        f"  directories: {inv.directories:,} ({fpd['directories_with_files']:,} with files; files per "
        f"directory min {fpd['min']:,} / median {fpd['median']:,.0f} / max {fpd['max']:,})"
    )
    exts = ", ".join(f"{e['extension']} {e['files']:,} ({human_bytes(e['bytes'])})" for e in inv.extensions)
    console.print(f"  extensions: {exts}")
    hist = Table(title="file sizes", title_justify="left", box=None, padding=(0, 2))
    hist.add_column("size")
    hist.add_column("files", justify="right")
    hist.add_column("bytes", justify="right")
    for b in inv.size_histogram:
        if b.files:
            hist.add_row(b.label, f"{b.files:,}", human_bytes(b.bytes))
    console.print(hist)
    if inv.unreadable:
        pairs = [(u["path"], u["reason"]) for u in inv.unreadable]
        console.print(f"  [yellow]unreadable: {len(pairs)}[/yellow] — {escape(describe_unreadable(pairs))}")
    console.print(f"[bold]Storage[/bold] {escape(loc.description)}")
    console.print(
        f"  mount: {escape(loc.mount_point)} ({loc.fs_type}, from {loc.source})   readahead: "
        f"{'n/a' if loc.read_ahead_kb is None else f'{loc.read_ahead_kb} KiB'}"
    )
    cached = report.residency
    share = (
        "unknown"
        if cached.cached_fraction is None
        else (
            f"{cached.cached_fraction:.0%} (~{human_bytes(cached.cached_bytes_estimate)}, from {cached.sampled_files:,} files)"
        )
    )
    shm = "n/a" if loc.shm_free_bytes is None else human_bytes(loc.shm_free_bytes)
    console.print(
        f"  in page cache: {share}   RAM available: {human_bytes(loc.ram_available_bytes)}   "
        f"/dev/shm free: {shm}   dataset: {human_bytes(inv.total_bytes)}"
    )


def render_measurements(report: DiskReport, console: Console) -> None:
    table = Table(
        title="Measured reads" + (" (interrupted: partial)" if report.interrupted else ""), title_justify="left"
    )
    for name, justify in (
        ("test", "left"),
        ("cache", "left"),
        ("threads", "right"),
        ("MB/s", "right"),
        ("rate", "right"),
        ("read", "right"),
        ("time", "right"),
        ("cold by", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]  # rich's JustifyMethod literal; ours are its values
    for c in report.cells:
        unit = {"sequential": "reads/s", "small_files": "files/s", "metadata": "ops/s"}[c.test]
        table.add_row(
            c.test.replace("_", " "),
            c.cache,
            str(c.threads),
            "" if c.test == "metadata" else f"{c.mb_per_s:,.0f}",
            f"{c.ops_per_s:,.0f} {unit}",
            "" if c.test == "metadata" else human_bytes(c.bytes),
            f"{c.seconds:.2f} s",
            " ".join(filter(None, [c.cold_method, None if c.complete else "(cut short)"])),
        )
    if report.cells:
        console.print(table)
    if report.sequential_source:
        console.print(
            f"  sequential reads: {escape(report.sequential_source)}, block size "
            f"{human_bytes(report.options.block_size)}"
        )
    for note in report.notes:
        console.print(f"  note: {note}", markup=False)


def render_verdict(report: DiskReport, console: Console) -> None:
    lines = verdict(report)
    console.print("[bold]Verdict[/bold]")
    for line in lines:
        console.print(f"  • {line}", markup=False, highlight=False)

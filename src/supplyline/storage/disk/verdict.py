"""The verdict of ``supplyline disk``: pure functions from a report to sentences with numbers.

The third checkpoint of docs/how-it-works.md (disk I/O and storage format): many small files → pack
them into shards; a dataset that fits in RAM → copy it to /dev/shm; slow or network storage → more
DataLoader workers, up to where it stops helping.
"""

from __future__ import annotations

from supplyline.storage.disk.diagnose import DiskReport
from supplyline.storage.disk.measure import Cell
from supplyline.units import human_bytes

SMALL_AVERAGE = 1 << 20  # a dataset whose median file is below this is a small-file dataset
PACK_MIN_GAIN = 2.0  # below this, shards are not worth the trouble
PACK_MIN_FILES = 10  # a handful of files gains nothing from shards, whatever the rates say
PACK_GAIN_SHOWN_MAX = 20.0  # past this the bytes/s ratio stops predicting: each sample still costs a read
SHM_MARGIN = 1.10  # the dataset plus 10% must fit in /dev/shm ...
RAM_SHARE = 0.5  # ... and take at most half the available RAM, which training needs too


def cells_of(report: DiskReport, test: str, cache: str) -> list[Cell]:
    return sorted(
        (c for c in report.cells if c.test == test and c.cache == cache and c.seconds > 0), key=lambda c: c.threads
    )


def best(report: DiskReport, test: str, cache: str) -> Cell | None:
    cells = cells_of(report, test, cache)
    return max(cells, key=lambda c: c.mb_per_s if test == "sequential" else c.ops_per_s, default=None)


def rate(value: float) -> str:
    return f"{value:,.0f}"


def gbps(cell: Cell) -> str:
    return f"{cell.mb_per_s / 1000:.2f} GB/s"


def enough_workers(cells: list[Cell], share: float = 0.9) -> int:
    """The fewest threads that reach ``share`` of the best rate: more workers than this buy little."""
    top = max(c.ops_per_s for c in cells)
    return min(c.threads for c in cells if c.ops_per_s >= share * top)


def verdict(report: DiskReport) -> list[str]:
    """Sentences, most important first. Every claim carries the numbers it rests on."""
    lines: list[str] = []
    inv, loc = report.inventory, report.location
    small_cold = best(report, "small_files", "cold")
    seq_cold = best(report, "sequential", "cold")
    small_cells = cells_of(report, "small_files", "cold")
    if loc.kind in ("network", "fuse") and small_cells:
        n = enough_workers(small_cells)
        ladder = " → ".join(f"{rate(c.ops_per_s)} ({c.threads})" for c in small_cells)
        lines.append(
            f"{loc.description}: latency dominates — cold small-file reads per second by thread count: "
            f"{ladder}; more DataLoader workers help up to {n}"
        )
    if loc.kind == "memory":
        lines.append(
            f"the dataset is on a memory file system ({loc.fs_type}): storage is not the bottleneck; "
            f"look at decoding and augmentation instead"
        )
    if (
        small_cold
        and seq_cold
        and inv.median_file_bytes < SMALL_AVERAGE
        and inv.files >= PACK_MIN_FILES
        and loc.kind != "memory"
        and seq_cold.mb_per_s >= PACK_MIN_GAIN * small_cold.mb_per_s
    ):
        gain = seq_cold.mb_per_s / small_cold.mb_per_s
        lines.append(
            f"{inv.files:,} files averaging {human_bytes(inv.mean_file_bytes)} read cold at "
            f"{rate(small_cold.ops_per_s)} files/s ({gbps(small_cold)}) while large sequential reads reach "
            f"{gbps(seq_cold)}: pack into shards (`supplyline pack`) — {_gain_text(gain)} faster reads expected"
        )
    if loc.kind != "memory" and loc.shm_free_bytes is not None and inv.total_bytes > 0:
        fits = (
            inv.total_bytes * SHM_MARGIN <= loc.shm_free_bytes
            and inv.total_bytes <= RAM_SHARE * loc.ram_available_bytes
        )
        if fits:
            warm = best(report, "small_files", "warm") or best(report, "sequential", "warm")
            speed = f" (warm reads here: {gbps(warm)})" if warm else ""
            lines.append(
                f"the dataset ({human_bytes(inv.total_bytes)}) fits in /dev/shm "
                f"({human_bytes(loc.shm_free_bytes)} free, {human_bytes(loc.ram_available_bytes)} RAM "
                f"available): `supplyline stage {report.path}` serves every epoch from RAM{speed}"
            )
    if loc.kind not in ("network", "fuse") and len(small_cells) > 1:
        first, top = small_cells[0], max(small_cells, key=lambda c: c.ops_per_s)
        if top.ops_per_s >= 1.3 * first.ops_per_s:
            ladder = " → ".join(f"{rate(c.ops_per_s)} ({c.threads})" for c in small_cells)
            lines.append(
                f"more DataLoader workers help: cold small-file reads per second by thread count: "
                f"{ladder}; {enough_workers(small_cells)} reach 90% of the best"
            )
    fraction = report.residency.cached_fraction
    if fraction is not None and fraction >= 0.9 and loc.kind != "memory":
        lines.append(
            f"{fraction:.0%} of the dataset is already in the page cache: reads run at warm speed "
            f"until memory pressure evicts it; the first epoch after a reboot is the slow one"
        )
    if not lines:
        lines.append(_no_problem(report, small_cold, seq_cold))
    if report.interrupted:
        lines.insert(0, "interrupted: the verdict rests on the measurements finished so far")
    return lines


def _gain_text(gain: float) -> str:
    return f"more than {PACK_GAIN_SHOWN_MAX:.0f}×" if gain > PACK_GAIN_SHOWN_MAX else f"about {gain:.0f}×"


def _no_problem(report: DiskReport, small_cold: Cell | None, seq_cold: Cell | None) -> str:
    if small_cold:
        return (
            f"storage keeps up at {rate(small_cold.ops_per_s)} files/s cold ({gbps(small_cold)}): if training "
            f"consumes fewer samples per second than that, the disk is not the bottleneck"
        )
    if seq_cold:
        return (
            f"large files read cold at {gbps(seq_cold)}: if training consumes less than that, "
            f"the disk is not the bottleneck"
        )
    return "nothing was measured, so there is no verdict"

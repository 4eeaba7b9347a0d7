"""``supplyline disk``: inventory, location and timed reads of one dataset, as one report."""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import dataclass, field
from typing import Any

from supplyline.errors import UserError
from supplyline.storage.disk.cache import Residency, dataset_residency
from supplyline.storage.disk.inventory import Inventory, take_inventory
from supplyline.storage.disk.location import Location, locate
from supplyline.storage.disk.measure import Cell, ProgressFn, measure_test, sequential_items, whole_file_items
from supplyline.storage.files import walk
from supplyline.units import human_bytes

LARGE_FILE = 8 << 20  # files at least this big count as "large" for the sequential test
TESTS = ("sequential", "small_files", "metadata")
MIN_JUDGE_BYTES = 64 << 10  # below this a dataset's reads take microseconds: no rate means anything


@dataclass
class Options:
    thread_counts: list[int]
    seconds: float = 5.0  # per cell, at most
    block_size: int = 1 << 20
    sequential_bytes: int = 1 << 30  # how much of the large files the sequential test reads
    small_files: int = 4000  # how many small files the small-file test reads
    small_bytes: int = 512 << 20
    probe_dir: str | None = None
    tests: tuple[str, ...] = TESTS
    seed: int = 0


@dataclass
class DiskReport:
    path: str
    inventory: Inventory
    location: Location
    residency: Residency
    options: Options
    cells: list[Cell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not measured, and why
    sequential_source: str = ""
    interrupted: bool = False
    files: list[tuple[str, int]] = field(default_factory=list, repr=False)  # (path, size), not saved

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "path": self.path,
            "inventory": self.inventory.to_dict(),
            "location": self.location.to_dict(),
            "page_cache": asdict(self.residency),
            "options": asdict(self.options),
            "measurements": [c.to_dict() for c in self.cells],
            "sequential_source": self.sequential_source,
            "notes": self.notes,
            "interrupted": self.interrupted,
        }


def survey(path: str, options: Options) -> DiskReport:
    """The cheap part: walk, inventory, location, page-cache residency. Raises UserError for bad PATH."""
    result = walk(path)
    if not result.files:
        extra = f" ({len(result.unreadable)} unreadable entries)" if result.unreadable else ""
        raise UserError(f"{path} holds no readable files{extra}")
    if result.total_bytes < MIN_JUDGE_BYTES:
        raise UserError(
            f"{path} holds {len(result.files)} file{'s' if len(result.files) != 1 else ''} of "
            f"{human_bytes(result.total_bytes)} in all: too little to judge storage by (reads that small "
            f"finish in microseconds, so any rate is noise); point at the whole dataset "
            f"(at least {human_bytes(MIN_JUDGE_BYTES)})"
        )
    _check_probe_dir(options.probe_dir, result.root)
    files = [(f.path, f.size) for f in result.files]
    return DiskReport(
        path=path,
        inventory=take_inventory(result),
        location=locate(result.root),
        residency=dataset_residency(files, seed=options.seed),
        options=options,
        files=files,
    )


def measure(report: DiskReport, progress: ProgressFn) -> DiskReport:
    """Run the timed tests into ``report.cells``; Ctrl-C stops and marks the report interrupted."""
    options = report.options
    files = report.files
    large = sorted((f for f in files if f[1] >= LARGE_FILE), key=lambda f: -f[1])
    large_set = _take_bytes(large, options.sequential_bytes)
    in_large = {p for p, _ in large_set}
    small_pool = [f for f in files if f[0] not in in_large and f[1] > 0]
    rng = random.Random(options.seed)
    rng.shuffle(small_pool)  # random order, as a shuffling DataLoader reads them
    small_set = _take_bytes(small_pool[: options.small_files], options.small_bytes)
    meta_set = rng.sample(files, min(len(files), options.small_files))
    probe: str | None = None
    cold_exists = report.location.kind != "memory"
    if not cold_exists:
        report.notes.append("cold: not measured — a memory file system has no cold state; warm is all there is")
    try:
        if "sequential" in options.tests:
            if not large_set:
                probe = _make_probe(report, options)
                if probe:
                    large_set = [(probe, os.path.getsize(probe))]
            total = sum(size for _, size in large_set)
            report.sequential_source = (
                f"a probe file of {human_bytes(total)}"
                if probe
                else f"the {len(large_set)} largest file{'s' if len(large_set) > 1 else ''} ({human_bytes(total)})"
                if large_set
                else "none"
            )
            if large_set:
                measure_test(
                    "sequential",
                    lambda n: sequential_items(large_set, n),
                    options.thread_counts,
                    options.seconds,
                    options.block_size,
                    report.cells,
                    progress,
                    cold_exists,
                )
        if "small_files" in options.tests:
            if small_set:
                measure_test(
                    "small_files",
                    lambda n: whole_file_items(small_set),
                    options.thread_counts,
                    options.seconds,
                    options.block_size,
                    report.cells,
                    progress,
                    cold_exists,
                )
            else:
                report.notes.append("small files: not measured (no files below the large-file size)")
        if "metadata" in options.tests:
            measure_test(
                "metadata",
                lambda n: whole_file_items(meta_set),
                options.thread_counts,
                options.seconds,
                options.block_size,
                report.cells,
                progress,
                cold_exists,
            )
            report.notes.append(
                "metadata: warm only — cold dentry/inode caches need root-only, "
                "machine-wide drop_caches, which supplyline does not do"
            )
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        if probe:
            _unlink(probe)
    return report


def _check_probe_dir(probe_dir: str | None, root: str) -> None:
    """The probe file stands in for the dataset's storage, so it must sit on the same file system."""
    if probe_dir is None:
        return
    if not os.path.isdir(probe_dir):
        raise UserError(f"--probe-dir {probe_dir} is not a directory")
    dataset_dir = root if os.path.isdir(root) else os.path.dirname(root)
    if os.stat(probe_dir).st_dev != os.stat(dataset_dir).st_dev:
        here, there = locate(probe_dir), locate(dataset_dir)
        raise UserError(
            f"--probe-dir {probe_dir} is on {here.mount_point} ({here.fs_type}), not on the dataset's "
            f"file system {there.mount_point} ({there.fs_type}): the probe would measure other storage; "
            "choose a directory next to the dataset"
        )


def _take_bytes(files: list[tuple[str, int]], budget: int) -> list[tuple[str, int]]:
    taken, total = [], 0
    for path, size in files:
        if total >= budget:
            break
        taken.append((path, size))
        total += size
    return taken


def _make_probe(report: DiskReport, options: Options) -> str | None:
    """A temporary large file on the dataset's file system, so the sequential rate of the same
    storage can be measured when the dataset has no large files. Removed afterwards."""
    root = report.inventory.root
    directory = options.probe_dir or (root if os.path.isdir(root) else os.path.dirname(root))
    size = min(options.sequential_bytes, 512 << 20)
    block = os.urandom(1 << 20)  # incompressible, so a compressing file system cannot flatter the rate
    try:
        fd, path = tempfile.mkstemp(prefix=".supplyline-probe-", dir=directory)
    except OSError as exc:
        report.notes.append(
            f"sequential: not measured — no large files, and no probe file could be written "
            f"in {directory} ({exc.strerror}); pass --probe-dir DIR on the same file system"
        )
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            for _ in range(size >> 20):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        _unlink(path)
        report.notes.append(
            f"sequential: not measured — writing a probe file in {directory} failed "
            f"({exc.strerror}); pass --probe-dir DIR on the same file system"
        )
        return None
    report.notes.append(
        f"sequential: no files >= 8 MiB in the dataset, so a {size >> 20} MiB probe file "
        f"was written next to it, read, and removed"
    )
    return path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

"""Inventory of a dataset: how many files, how big, how they spread over directories and types."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from supplyline.storage.files import Walk

# Upper bounds (exclusive) of the size histogram's bins, in bytes; the last bin is open-ended.
SIZE_BIN_EDGES: list[int] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 16 << 20, 256 << 20]


def bin_label(index: int) -> str:
    """``"16 KiB–64 KiB"`` style label of histogram bin ``index``."""
    from supplyline.units import human_bytes

    def short(n: int) -> str:
        return human_bytes(n).replace(".0 ", " ")

    if index == 0:
        return f"< {short(SIZE_BIN_EDGES[0])}"
    if index == len(SIZE_BIN_EDGES):
        return f">= {short(SIZE_BIN_EDGES[-1])}"
    return f"{short(SIZE_BIN_EDGES[index - 1])}–{short(SIZE_BIN_EDGES[index])}"


@dataclass
class SizeBin:
    label: str
    files: int
    bytes: int


@dataclass
class Inventory:
    """Counts over the regular files of a walk. Sizes are in bytes."""

    root: str
    files: int
    total_bytes: int
    mean_file_bytes: float
    median_file_bytes: float
    largest_file_bytes: int
    directories: int
    size_histogram: list[SizeBin]
    files_per_directory: dict[str, float]  # min / median / max over directories holding files
    extensions: list[dict[str, Any]]  # [{"extension", "files", "bytes"}], most files first
    unreadable: list[dict[str, str]] = field(default_factory=list)  # [{"path", "reason"}]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def take_inventory(result: Walk, top_extensions: int = 10) -> Inventory:
    sizes = [f.size for f in result.files]
    bins = [SizeBin(bin_label(i), 0, 0) for i in range(len(SIZE_BIN_EDGES) + 1)]
    for size in sizes:
        b = bins[_bin_index(size)]
        b.files += 1
        b.bytes += size
    per_dir = Counter(os.path.dirname(f.rel) for f in result.files)
    ext_files: Counter[str] = Counter()
    ext_bytes: Counter[str] = Counter()
    for f in result.files:
        ext = _extension(f.rel)
        ext_files[ext] += 1
        ext_bytes[ext] += f.size
    counts = sorted(per_dir.values())
    return Inventory(
        root=result.root,
        files=len(sizes),
        total_bytes=sum(sizes),
        mean_file_bytes=statistics.fmean(sizes) if sizes else 0.0,
        median_file_bytes=float(statistics.median(sizes)) if sizes else 0.0,
        largest_file_bytes=max(sizes, default=0),
        directories=result.directories,
        size_histogram=bins,
        files_per_directory={
            "directories_with_files": len(counts),
            "min": counts[0] if counts else 0,
            "median": float(statistics.median(counts)) if counts else 0.0,
            "max": counts[-1] if counts else 0,
        },
        extensions=[
            {"extension": e, "files": n, "bytes": ext_bytes[e]}
            for e, n in sorted(ext_files.items(), key=lambda kv: (-kv[1], kv[0]))[:top_extensions]
        ],
        unreadable=[{"path": rel, "reason": reason} for rel, reason in result.unreadable],
    )


def _bin_index(size: int) -> int:
    for i, edge in enumerate(SIZE_BIN_EDGES):
        if size < edge:
            return i
    return len(SIZE_BIN_EDGES)


def _extension(rel: str) -> str:
    """Lower-case last extension with its dot, or ``"(none)"``."""
    ext = os.path.splitext(os.path.basename(rel))[1].lower()
    return ext or "(none)"

"""Inventory, location and page-cache residency on files the tests make."""

from __future__ import annotations

import os

import pytest

from supplyline.errors import UserError
from supplyline.storage.disk.cache import evict, resident_bytes
from supplyline.storage.disk.inventory import take_inventory
from supplyline.storage.disk.location import locate
from supplyline.storage.files import walk
from supplyline.units import parse_size


def _write(path: str, size: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "ds"
    for i in range(5):
        _write(str(root / "a" / f"{i}.jpg"), 1000)  # < 4 KiB bin
    for i in range(3):
        _write(str(root / "b" / f"{i}.JPG"), 20_000)  # 16-64 KiB bin
    _write(str(root / "b" / "deep" / "x.npy"), 300_000)  # 256 KiB - 1 MiB bin
    _write(str(root / "README"), 10)  # no extension
    os.symlink(str(root / "nowhere"), str(root / "a" / "dangling.jpg"))
    os.mkfifo(str(root / "b" / "pipe.jpg"))
    return str(root)


def test_inventory_counts_are_exact(dataset):
    inv = take_inventory(walk(dataset))
    assert inv.files == 10
    assert inv.total_bytes == 5 * 1000 + 3 * 20_000 + 300_000 + 10
    assert inv.largest_file_bytes == 300_000
    assert inv.median_file_bytes == 1000  # sorted: 10, 1000 x5, 20000 x3, 300000 -> mean of 5th/6th
    assert inv.directories == 4  # ds, a, b, b/deep
    hist = {b.label: (b.files, b.bytes) for b in inv.size_histogram if b.files}
    assert hist == {"< 4 KiB": (6, 5010), "16 KiB–64 KiB": (3, 60_000), "256 KiB–1 MiB": (1, 300_000)}
    assert inv.files_per_directory == {"directories_with_files": 4, "min": 1, "median": 2.0, "max": 5}
    exts = {e["extension"]: (e["files"], e["bytes"]) for e in inv.extensions}
    assert exts == {".jpg": (8, 65_000), ".npy": (1, 300_000), "(none)": (1, 10)}


def test_unreadable_entries_are_listed_not_fatal(dataset):
    inv = take_inventory(walk(dataset))
    reasons = {u["path"]: u["reason"] for u in inv.unreadable}
    assert reasons == {"a/dangling.jpg": "dangling symlink", "b/pipe.jpg": "not a regular file (FIFO)"}


def test_missing_path_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        walk(str(tmp_path / "missing"))


def test_location_of_memory_and_disk():
    shm = locate("/dev/shm")
    assert shm.fs_type == "tmpfs" and shm.kind == "memory" and shm.device is None
    here = locate(os.getcwd())
    assert here.kind in {"nvme", "ssd", "hdd", "virtual-disk", "network", "fuse", "overlay", "unknown", "memory"}
    assert here.ram_available_bytes > 0


def test_page_cache_residency_follows_eviction_and_reads(tmp_path):
    path = str(tmp_path / "f.bin")
    _write(path, 4 << 20)
    assert evict(path) is True
    assert resident_bytes(path) == (0, 4 << 20)
    with open(path, "rb") as fh:
        fh.read()
    cached, size = resident_bytes(path)
    assert size == 4 << 20 and cached == size


def test_parse_size():
    assert parse_size("256MB") == 256 << 20
    assert parse_size("1G") == 1 << 30
    assert parse_size("4096") == 4096
    with pytest.raises(UserError):
        parse_size("lots")

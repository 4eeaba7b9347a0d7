"""Loose small files vs. `supplyline pack` shards, read cold through a real DataLoader.

Makes N files of about SIZE bytes in a class-per-folder layout, packs them into webdataset shards
with supplyline's own packer, drops both from the page cache, and reads each once through a
DataLoader with the same workers and batch size: the loose files in shuffled order (a map-style
dataset, as ImageFolder reads them), the shards through ShardDataset with a shuffle buffer.
Each is read cold ROUNDS times, alternating which goes first, and the best round of each counts:
on a shared virtual machine the first reads after a large write are slowed by the host flushing
it, and other jobs come and go. Prints every round, both best rates and their ratio.
Everything it made is removed afterwards.

    PYTHONPATH=src python benchmarks/pack_speedup.py --files 30000 --size 100KB --workers 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
from torch.utils.data import DataLoader, Dataset

from supplyline.datasets import ShardDataset
from supplyline.storage.disk.cache import evict_all
from supplyline.storage.files import walk
from supplyline.storage.pack.run import pack
from supplyline.storage.pack.samples import plan_samples
from supplyline.units import parse_size


class LooseFiles(Dataset):
    """What an ImageFolder-style dataset does per sample: open, read, close one file."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> int:
        with open(self.paths[index], "rb") as fh:
            return len(fh.read())


def sample_size(sample: dict) -> int:
    return len(sample["jpg"])


def total(batch: list[int]) -> int:
    return sum(batch)


def make_files(root: str, count: int, size: int, classes: int = 10) -> list[str]:
    rng = np.random.default_rng(0)
    pool = rng.bytes(4 << 20)  # slices of one random pool: incompressible and fast to make
    sizes = rng.integers(int(size * 0.8), int(size * 1.2) + 1, count)
    paths = []
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c:02d}"))
    for i, n in enumerate(sizes):
        path = os.path.join(root, f"class{i % classes:02d}", f"{i:07d}.jpg")
        start = int(rng.integers(0, len(pool) - n))
        with open(path, "wb") as fh:
            fh.write(pool[start : start + n])
        paths.append(path)
    os.sync()  # so eviction can drop the pages: dirty pages stay cached
    return paths


def timed_epoch(loader: DataLoader) -> tuple[float, int]:
    start = time.perf_counter()
    read = sum(loader)
    return time.perf_counter() - start, read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30000)
    parser.add_argument("--size", default="100KB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="cold reads of each, alternating (default 2)")
    parser.add_argument("--dir", help="where to make the data (default: a temporary folder under /tmp)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="supplyline-bench-", dir=args.dir)
    try:
        src, dst = os.path.join(base, "loose"), os.path.join(base, "shards")
        t = time.perf_counter()
        paths = make_files(src, args.files, parse_size(args.size))
        print(f"made {len(paths):,} files in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        t = time.perf_counter()
        plan = plan_samples(src, "auto", 0)
        manifest = pack(plan, dst, "webdataset", 256 << 20, False, 0, lambda n: None).manifest
        shards = [os.path.join(dst, s["name"]) for s in manifest["shards"]]
        os.sync()
        print(f"packed into {len(shards)} shards in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        data_bytes = walk(src).total_bytes

        loose = DataLoader(
            LooseFiles(paths), batch_size=args.batch_size, shuffle=True, num_workers=args.workers, collate_fn=total
        )
        packed = DataLoader(
            ShardDataset(dst, shuffle_buffer=1000, transform=sample_size),
            batch_size=args.batch_size,
            num_workers=args.workers,
            collate_fn=total,
        )
        runs = {"loose files": (loose, paths), "shards": (packed, shards)}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for r in range(args.rounds):
            for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
                loader, files = runs[name]
                evict_all(files)
                seconds, read = timed_epoch(loader)
                assert read == data_bytes, (name, read, data_bytes)  # every byte read, exactly once
                times[name].append(seconds)
                print(f"round {r + 1}: {name:12s} {seconds:6.2f} s", file=sys.stderr)

        n = len(paths)
        print(
            f"{n:,} samples, {data_bytes / 1e9:.2f} GB, {args.workers} workers, batch {args.batch_size}, "
            f"cold cache, best of {args.rounds}"
        )
        for name, seconds in times.items():
            best = min(seconds)
            print(f"{name:12s}: {best:6.2f} s  {n / best:9,.0f} samples/s  {data_bytes / best / 1e9:.2f} GB/s")
        ratio = min(times["loose files"]) / min(times["shards"])
        print(f"shards / loose files: {ratio:.1f}x faster (goal >= 5x)")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

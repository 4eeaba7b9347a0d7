"""`supplyline disk`'s cold sequential rate agrees with Debian's fio on the same file.

Kept fair: the same 512 MiB file, 1 MiB reads, one reader, page cache dropped before each run
(fio: invalidate=1; supplyline: posix_fadvise DONTNEED), and the same kind of read buffer
(an anonymous mmap: fio's --mem=mmap; with fio's default malloc buffers this kernel reads
measurably slower, which would compare buffers, not storage). The machine is shared with other
busy jobs, so runs alternate back to back and the best run of each tool is compared — the run least
disturbed by others, as benchmarks take the fastest of several repeats.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess

import pytest
from storage_helpers import payload

SIZE = 512 << 20
PAIRS = 7


def _fio_cold_mb_s(path: str) -> float:
    done = subprocess.run(
        [
            "fio",
            "--name=seq",
            f"--filename={path}",
            "--rw=read",
            "--bs=1M",
            "--ioengine=psync",
            "--invalidate=1",
            "--direct=0",
            "--mem=mmap",
            f"--size={SIZE}",
            "--numjobs=1",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["jobs"][0]["read"]["bw_bytes"] / 1e6


def _supplyline_cold_mb_s(cli, path: str, out: str) -> float:
    done = cli(
        [
            "disk",
            path,
            "--only",
            "sequential",
            "--threads",
            "1",
            "--block-size",
            "1M",
            "--sequential-bytes",
            "1G",
            "--json",
            out,
        ]
    )
    assert done.returncode == 0, done.stderr
    cells = [m for m in json.load(open(out))["measurements"] if m["cache"] == "cold"]
    assert len(cells) == 1 and cells[0]["bytes"] == SIZE and cells[0]["cold_method"] == "fadvise"
    return cells[0]["mb_per_s"]


@pytest.mark.slow
@pytest.mark.flaky(reruns=1)  # a shared virtual disk: one idle run saw our reads vary 570-1675 MB/s
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (apt-get install fio)")
def test_cold_sequential_rate_agrees_with_fio(tmp_path, cli):
    path = str(tmp_path / "seq.bin")
    block = payload("fio", 1 << 20)
    with open(path, "wb") as fh:
        for i in range(SIZE >> 20):
            fh.write(block[i:] + block[:i])  # every MiB different, nothing for a dedup layer to fold
        fh.flush()
        os.fsync(fh.fileno())
    ratios, fio_rates, our_rates = [], [], []
    # One untimed round each first: the first reads after writing the file are slower for
    # reasons outside the guest (the host's cache), whoever happens to go first.
    _fio_cold_mb_s(path)
    _supplyline_cold_mb_s(cli, path, str(tmp_path / "warmup.json"))
    for i in range(PAIRS):
        out = str(tmp_path / f"r{i}.json")
        # alternate who goes first, so a drift in the machine's load favours neither
        if i % 2:
            ours, theirs = _supplyline_cold_mb_s(cli, path, out), _fio_cold_mb_s(path)
        else:
            theirs, ours = _fio_cold_mb_s(path), _supplyline_cold_mb_s(cli, path, out)
        fio_rates.append(theirs)
        our_rates.append(ours)
        ratios.append(ours / theirs)
    best = max(our_rates) / max(fio_rates)
    print(
        f"supplyline/fio cold sequential: best {max(our_rates):.0f} / {max(fio_rates):.0f} MB/s = {best:.2f}; "
        f"pairwise ratios {[round(r, 2) for r in ratios]}, median {statistics.median(ratios):.2f}"
    )
    assert 0.85 <= best <= 1.15, f"supplyline/fio = {best:.2f} (fio {fio_rates}, supplyline {our_rates})"

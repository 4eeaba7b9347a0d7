"""`supplyline disk` end to end on real files, its verdict, and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from supplyline.storage.disk.cache import Residency
from supplyline.storage.disk.diagnose import DiskReport, Options
from supplyline.storage.disk.inventory import take_inventory
from supplyline.storage.disk.location import Location
from supplyline.storage.disk.measure import Cell
from supplyline.storage.disk.verdict import verdict
from supplyline.storage.files import walk


def _dataset(root, files: int, size: int, large: int = 0) -> str:
    os.makedirs(root / "d", exist_ok=True)
    for i in range(files):
        (root / "d" / f"{i:05d}.jpg").write_bytes(os.urandom(size))
    if large:
        (root / "d" / "big.bin").write_bytes(os.urandom(large))
    return str(root / "d")


@pytest.mark.slow
def test_disk_measures_every_cell_and_writes_json(tmp_path, cli):
    path = _dataset(tmp_path, 300, 30_000, large=16 << 20)
    out = str(tmp_path / "r.json")
    done = cli(["disk", path, "--threads", "1,2", "--seconds", "2", "--json", out])
    assert done.returncode == 0, done.stderr
    report = json.load(open(out))
    assert report["inventory"]["files"] == 301
    assert report["inventory"]["total_bytes"] == 300 * 30_000 + (16 << 20)
    got = {(m["test"], m["cache"], m["threads"]) for m in report["measurements"]}
    assert got == {(t, c, n) for t in ("sequential", "small_files") for c in ("cold", "warm") for n in (1, 2)} | {
        ("metadata", "warm", 1),
        ("metadata", "warm", 2),
    }
    for m in report["measurements"]:
        assert m["ops_per_s"] > 0 and m["complete"]
        if m["cache"] == "cold":
            assert m["cold_method"] in ("fadvise", "O_DIRECT")
    small_cold = [m for m in report["measurements"] if m["test"] == "small_files" and m["cache"] == "cold"]
    assert all(m["ops"] == 300 for m in small_cold)  # every small file read once, none twice
    assert report["verdict"] and "Verdict" in done.stdout
    assert report["location"]["mount_point"] and report["page_cache"]["sampled_files"] == 301


@pytest.mark.slow
def test_probe_file_when_no_large_files_and_it_is_removed(tmp_path, cli):
    path = _dataset(tmp_path, 50, 10_000)
    before = sorted(os.listdir(path))
    done = cli(
        [
            "disk",
            path,
            "--threads",
            "1",
            "--only",
            "sequential",
            "--sequential-bytes",
            "32M",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert done.returncode == 0, done.stderr
    report = json.load(open(tmp_path / "r.json"))
    assert report["sequential_source"].startswith("a probe file of 32.0 MiB")
    cold = next(m for m in report["measurements"] if m["cache"] == "cold")
    assert cold["bytes"] == 32 << 20
    assert sorted(os.listdir(path)) == before


def test_bad_paths_give_one_line(tmp_path, cli):
    missing = cli(["disk", str(tmp_path / "nope")])
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = cli(["disk", str(tmp_path / "empty")])
    assert empty.returncode == 2 and "holds no readable files" in empty.stderr
    bad = cli(["disk", str(tmp_path), "--threads", "0"])
    assert bad.returncode == 2 and "--threads" in bad.stderr


@pytest.mark.slow
def test_ctrl_c_prints_what_was_measured(tmp_path):
    # A sparse file: gigabytes to read, nothing on disk; the time limit is far away.
    path = str(tmp_path / "sparse.bin")
    with open(path, "wb") as fh:
        fh.truncate(64 << 30)
    out = str(tmp_path / "r.json")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "supplyline",
            "disk",
            path,
            "--only",
            "sequential",
            "--threads",
            "1",
            "--seconds",
            "120",
            "--sequential-bytes",
            "64G",
            "--json",
            out,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = ""
    while "Measuring" not in seen:
        line = proc.stdout.readline()
        assert line, "supplyline disk ended before measuring"
        seen += line
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted: partial" in stdout and "cut short" in stdout
    report = json.load(open(out))
    assert report["interrupted"] is True
    cell = report["measurements"][0]
    assert cell["complete"] is False and cell["bytes"] > 0 and cell["seconds"] < 60
    assert report["verdict"][0].startswith("interrupted")


def _report(tmp_path, kind: str, cells: list[Cell], shm_free: int = 0) -> DiskReport:
    path = _dataset(tmp_path, 20, 110_000)
    inv = take_inventory(walk(path))
    loc = Location(
        "/",
        "nfs4" if kind == "network" else "ext4",
        "srv:/x",
        None,
        kind,
        f"{kind} storage",
        None,
        None,
        64 << 30,
        shm_free,
    )
    return DiskReport(path, inv, loc, Residency(0.0, 0, 20), Options([1, 2, 8]), cells)


def _cell(test, cache, threads, mb_s, ops_s) -> Cell:
    return Cell(test, cache, threads, 1.0, int(mb_s * 1e6), int(ops_s), "fadvise" if cache == "cold" else None, True)


def test_verdict_advises_packing_with_the_numbers(tmp_path):
    cells = [
        _cell("small_files", "cold", 1, 340, 3100),
        _cell("small_files", "cold", 8, 330, 3000),
        _cell("sequential", "cold", 1, 2300, 2300),
    ]
    lines = verdict(_report(tmp_path, "ssd", cells))
    pack = next(line for line in lines if "supplyline pack" in line)
    assert "20 files averaging 107.4 KiB read cold at 3,100 files/s (0.34 GB/s)" in pack
    assert "2.30 GB/s" in pack and "about 7× faster" in pack


def test_verdict_network_names_the_worker_count(tmp_path):
    cells = [
        _cell("small_files", "cold", 1, 20, 200),
        _cell("small_files", "cold", 2, 40, 400),
        _cell("small_files", "cold", 8, 41, 410),
    ]
    lines = verdict(_report(tmp_path, "network", cells))
    assert "latency dominates" in lines[0] and "help up to 2" in lines[0]


def test_verdict_stage_when_it_fits_in_shm(tmp_path):
    fits = verdict(_report(tmp_path, "ssd", [], shm_free=1 << 30))
    assert any("fits in /dev/shm" in line and "supplyline stage" in line for line in fits)
    no_room = verdict(_report(tmp_path, "ssd", [], shm_free=1000))
    assert not any("fits in /dev/shm" in line for line in no_room)


def test_memory_file_system_is_measured_warm_only(cli, tmp_path):
    import shutil
    import tempfile

    root = tempfile.mkdtemp(dir="/dev/shm", prefix="supplyline-test-")
    try:
        for i in range(20):
            with open(os.path.join(root, f"{i}.bin"), "wb") as fh:
                fh.write(os.urandom(5000))
        out = str(tmp_path / "r.json")
        done = cli(["disk", root, "--only", "small_files", "--threads", "1", "--json", out])
        assert done.returncode == 0, done.stderr
        report = json.load(open(out))
        assert report["location"]["kind"] == "memory"
        assert [m["cache"] for m in report["measurements"]] == ["warm"]
        assert "memory file system" in report["verdict"][0]
    finally:
        shutil.rmtree(root)


def test_on_a_terminal_the_progress_line_says_what_runs_and_how_long_is_left(tmp_path):
    """stderr on a real pseudo-terminal: rich draws the bar there (never in a pipe or a log)."""
    import pty
    import select

    root = _dataset(tmp_path, files=30, size=4096)
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "supplyline", "disk", root, "--only", "small_files", "--threads", "1,2"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(master)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert "small files" in text and "left" in text, text  # what runs, and the time left beside the time so far

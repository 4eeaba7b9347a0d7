"""The process tree: a real parent with two real worker children, on both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from supplyline.collect.proctree import ProcessTree, ProcfsBackend

# A parent that starts two busy workers (as a DataLoader does) and waits for them.
_PARENT = """
import multiprocessing as mp, sys, time
def spin():
    end = time.time() + 30
    while time.time() < end:
        sum(range(1000))
if __name__ == "__main__":
    workers = [mp.get_context("fork").Process(target=spin) for _ in range(2)]
    for w in workers: w.start()
    print("ready", flush=True)
    for w in workers: w.join()
"""

BACKENDS = ["psutil"] + (["procfs"] if ProcfsBackend.usable() else [])


@pytest.fixture
def parent():
    proc = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    workers = psutil.Process(proc.pid).children()
    yield proc
    for p in [*workers, proc]:  # the workers would outlive their parent: end each by its PID
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sees_both_workers_with_their_cpu(parent, backend) -> None:
    tree = ProcessTree(parent.pid, backend=backend)
    tree.read()
    time.sleep(0.5)
    samples = tree.read()
    by_role: dict[str, list] = {}
    for s in samples:
        by_role.setdefault(s.role, []).append(s)
    assert [s.pid for s in by_role["root"]] == [parent.pid]
    children = by_role["child"]
    assert len(children) == 2
    assert all(c.ppid == parent.pid for c in children)
    # Two spinning workers: each gets some share of a core even on a crowded shared machine.
    assert all(c.cpu_pct > 2 for c in children), [(c.pid, c.cpu_pct) for c in samples]
    assert all(c.rss_bytes > 1_000_000 and c.status for c in children)
    assert tree.root_alive


def test_backends_agree_on_members_and_memory(parent) -> None:
    if len(BACKENDS) < 2:
        pytest.skip("procfs backend needs Linux /proc/PID/task/TID/children")
    readings = {b: {s.pid: s for s in ProcessTree(parent.pid, backend=b).read()} for b in BACKENDS}
    assert readings["procfs"].keys() == readings["psutil"].keys()
    for pid, s in readings["procfs"].items():
        other = readings["psutil"][pid]
        assert (s.name, s.ppid) == (other.name, other.ppid)
        assert s.rss_bytes == pytest.approx(other.rss_bytes, rel=0.05)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vanished_processes_are_dropped_and_root_exit_is_seen(backend) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    tree = ProcessTree(proc.pid, backend=backend)
    assert [s.pid for s in tree.read()] == [proc.pid]
    proc.kill()
    proc.wait(timeout=30)
    assert tree.read() == []
    assert not tree.root_alive


def test_io_rates_of_a_writer(tmp_path) -> None:
    tree = ProcessTree(os.getpid(), refresh_children_s=60)
    tree.read()
    with open(tmp_path / "out.bin", "wb") as fh:
        fh.write(os.urandom(8 * 2**20))
        fh.flush()
        os.fsync(fh.fileno())
    me = next(s for s in tree.read() if s.pid == os.getpid())
    if me.write_bytes_per_s is None:
        pytest.skip("/proc/self/io is not readable here")
    assert me.write_bytes_per_s > 0


def test_procfs_tree_sees_a_child_forked_right_after_a_read() -> None:
    if not ProcfsBackend.usable():
        pytest.skip("no /proc/PID/task/TID/children here")
    tree = ProcessTree(os.getpid(), refresh_children_s=60, backend="procfs")
    tree.read()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in [s.pid for s in tree.read()]  # a DataLoader worker forked mid-window is sampled
    finally:
        child.kill()
        child.wait(timeout=30)

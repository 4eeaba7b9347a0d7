"""stage under faults: SIGKILL and SIGINT mid-copy, a source file that vanishes, a full
destination, a pseudo file system. A DST that exists is always complete; nothing partial stays."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from faults_helpers import (
    assert_one_line,
    files_under,
    run_script,
    small_tmpfs,
    start_supplyline,
    supplyline,
    wait_for,
    write_script,
)


def _source(root: str, files: int, size: int) -> str:
    os.makedirs(root)
    for i in range(files):
        with open(os.path.join(root, f"{i:03d}.bin"), "wb") as fh:
            fh.write(os.urandom(size))
    return root


def _partials(parent: str) -> list[str]:
    return [name for name in os.listdir(parent) if ".partial-" in name]


def _kill_mid_copy(tmp_path, sig: int) -> tuple[subprocess.Popen[str], str, str]:
    src = _source(str(tmp_path / "src"), 40, 4 << 20)  # 160 MiB: long enough to be caught copying
    parent = str(tmp_path / "staged")
    os.makedirs(parent)
    dst = os.path.join(parent, "ds")
    proc = start_supplyline(["stage", src, dst])
    wait_for(lambda: bool(_partials(parent)) or proc.poll() is not None, "the copy to start")
    if proc.poll() is not None:
        pytest.skip("the copy finished before it could be interrupted")
    os.kill(proc.pid, sig)
    proc.communicate(timeout=120)
    return proc, src, dst


@pytest.mark.slow
def test_sigkill_mid_copy_then_rerun_removes_the_partial_and_stages(tmp_path):
    proc, src, dst = _kill_mid_copy(tmp_path, signal.SIGKILL)
    parent = os.path.dirname(dst)
    assert proc.returncode == -signal.SIGKILL
    assert _partials(parent) and not os.path.exists(dst)  # the kill left a partial, never a DST
    again = supplyline(["stage", src, dst])
    assert again.returncode == 0, again.stderr
    assert _partials(parent) == []
    assert sorted(os.listdir(dst)) == sorted([*os.listdir(src), ".supplyline-stage.json"])


@pytest.mark.slow
def test_sigkill_mid_copy_then_cleanup_removes_the_partial(tmp_path):
    proc, _, dst = _kill_mid_copy(tmp_path, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    done = supplyline(["stage", str(tmp_path / "src"), dst, "--cleanup"])
    assert done.returncode == 0, done.stderr
    assert os.listdir(os.path.dirname(dst)) == []


@pytest.mark.slow
def test_sigint_mid_copy_removes_the_partial(tmp_path):
    proc, _, dst = _kill_mid_copy(tmp_path, signal.SIGINT)
    assert proc.returncode == 130
    assert os.listdir(os.path.dirname(dst)) == []


def test_a_live_stages_partial_is_left_alone(tmp_path):
    src = _source(str(tmp_path / "src"), 3, 30_000)
    parent = tmp_path / "staged"
    parent.mkdir()
    live = subprocess.Popen(["sleep", "60"])
    try:
        other = parent / f".ds.partial-{live.pid}"  # another stage, still running
        other.mkdir()
        dead = parent / ".ds.partial-999999999"  # no such PID
        dead.mkdir()
        done = supplyline(["stage", src, str(parent / "ds")])
        assert done.returncode == 0, done.stderr
        assert other.exists() and not dead.exists()
    finally:
        live.kill()
        live.wait()


VANISH = """
import os, sys
import supplyline.storage.stage as stage
from supplyline.cli import main

real_open = stage._open_source
def open_and_lose_the_last(f):
    # The dataset changes under the copy: another job deletes a file that was walked.
    last = os.path.join(sys.argv[1], "002.bin")
    if os.path.exists(last) and not f.path.endswith("002.bin"):
        os.unlink(last)
    return real_open(f)
stage._open_source = open_and_lose_the_last
sys.exit(main(["stage", sys.argv[1], sys.argv[2]]))
"""


def test_source_file_vanishing_mid_copy_names_the_source(tmp_path):
    src = _source(str(tmp_path / "src"), 3, 30_000)
    parent = tmp_path / "staged"
    parent.mkdir()
    script = write_script(str(tmp_path), VANISH)
    done = run_script(script, src, str(parent / "ds"))
    assert_one_line(done, 2, "002.bin vanished from SRC", "nothing staged")
    assert "cannot stage into" not in done.stderr  # not blamed on the destination
    assert os.listdir(parent) == []


def test_full_destination_is_one_line_and_leaves_nothing(tmp_path):
    src = _source(str(tmp_path / "src"), 4, 1 << 20)
    with small_tmpfs(str(tmp_path / "small"), "1m") as small:
        done = supplyline(["stage", src, os.path.join(small, "ds")])
        assert_one_line(done, 2, "not staged")
        assert files_under(small) == []


def test_pseudo_file_system_is_refused(tmp_path):
    done = supplyline(["stage", "/proc/self/net", str(tmp_path / "ds")])
    assert_one_line(done, 2, "/proc (proc)", "not storage")
    assert os.listdir(tmp_path) == []


def test_foreign_destination_is_never_replaced(tmp_path):
    src = _source(str(tmp_path / "src"), 2, 30_000)
    dst = tmp_path / "mine"
    dst.mkdir()
    (dst / "precious.txt").write_text("keep")
    done = supplyline(["stage", src, str(dst), "--force"])
    assert_one_line(done, 2, "not made by supplyline stage")
    assert (dst / "precious.txt").read_text() == "keep"

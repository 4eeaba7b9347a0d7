"""disk (and pack) refuse inputs that would only produce nonsense: a pseudo file system, a dataset
too small to judge, a probe directory on other storage. One line each, nothing written."""

from __future__ import annotations

import os

import pytest
from faults_helpers import assert_one_line, supplyline


def test_single_tiny_file_is_too_small_to_judge(tmp_path):
    (tmp_path / "one.txt").write_text("hello\n")
    done = supplyline(["disk", str(tmp_path / "one.txt"), "--json", str(tmp_path / "r.json")])
    assert_one_line(done, 2, "1 file of 6 B", "too little to judge")
    assert "pack into shards" not in done.stdout
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("path", ["/proc/self", "/proc/self/net", "/sys/kernel"])
def test_pseudo_file_systems_are_refused(tmp_path, path):
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    done = supplyline(["disk", path, "--json", str(tmp_path / "r.json")])
    assert_one_line(done, 2, "a view of the kernel, not storage")
    assert "O_DIRECT" not in done.stdout and not (tmp_path / "r.json").exists()


def test_probe_dir_on_another_file_system_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(20):
        (data / f"{i}.bin").write_bytes(os.urandom(10_000))
    if os.stat("/dev/shm").st_dev == os.stat(data).st_dev:
        pytest.skip("the test folder is on /dev/shm's file system itself")
    done = supplyline(["disk", str(data), "--probe-dir", "/dev/shm"])
    assert_one_line(done, 2, "--probe-dir /dev/shm", "not on the dataset's file system")
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(".supplyline-probe-")]


def test_pack_refuses_a_pseudo_file_system(tmp_path):
    done = supplyline(["pack", "/proc/self/net", str(tmp_path / "out")])
    assert_one_line(done, 2, "not storage")
    assert not (tmp_path / "out").exists()


def test_the_pack_advice_never_promises_absurd_gains():
    from supplyline.storage.disk.verdict import _gain_text

    assert _gain_text(103461.0) == "more than 20×" and _gain_text(7.2) == "about 7×"

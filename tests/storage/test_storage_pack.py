"""`supplyline pack`: round trips, manifest, refusals, resume after SIGKILL, full disks, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from storage_helpers import make_basename_dataset, make_imagefolder, pack_in_process, tree_bytes

from supplyline.datasets import LMDBDataset, ShardDataset
from supplyline.datasets.shards import iter_shard_samples
from supplyline.errors import UserError

FORMATS = ["webdataset", "lmdb"]


def _read_all(dst: str, fmt: str) -> dict[str, dict[str, bytes]]:
    samples = ShardDataset(dst) if fmt == "webdataset" else LMDBDataset(dst)
    out: dict[str, dict[str, bytes]] = {}
    for sample in samples:
        assert sample["__key__"] not in out, "a sample came back twice"
        out[sample["__key__"]] = {k: v for k, v in sample.items() if not k.startswith("__")}
    return out


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_basename_round_trip_identical_bytes_and_labels(tmp_path, cli, fmt):
    expected = make_basename_dataset(str(tmp_path / "src"), 60)
    dst = str(tmp_path / "out")
    done = cli(["pack", str(tmp_path / "src"), dst, "--format", fmt, "--shard-size", "32KB", "--verify"])
    assert done.returncode == 0, done.stderr
    assert "verified 60 samples" in done.stdout
    assert _read_all(dst, fmt) == expected
    manifest = json.load(open(os.path.join(dst, "manifest.json")))
    assert manifest["samples"] == 60 and manifest["layout"] == "basename" and manifest["format"] == fmt
    assert sum(s["samples"] for s in manifest["shards"]) == 60
    if fmt == "webdataset":
        assert len(manifest["shards"]) > 1  # 32 KB shards: several
        assert sorted(os.listdir(dst)) == sorted(["manifest.json"] + [s["name"] for s in manifest["shards"]])
    else:
        assert sorted(os.listdir(dst)) == ["data.mdb", "manifest.json"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_imagefolder_writes_class_labels(tmp_path, fmt):
    expected = make_imagefolder(str(tmp_path / "src"), ["zebra", "ant", "cat"], 7)
    dst = str(tmp_path / "out")
    manifest = pack_in_process(str(tmp_path / "src"), dst, fmt)
    got = _read_all(dst, fmt)
    assert got == expected
    assert {k: int(v["cls"]) for k, v in got.items() if k.startswith("cat/")} == {f"cat/img_{i}": 1 for i in range(7)}
    assert manifest["classes"] == ["ant", "cat", "zebra"] and manifest["label_field"] == "cls"
    assert manifest == json.load(open(os.path.join(dst, "manifest.json")))


@pytest.mark.slow
def test_refuses_to_overwrite_without_force_and_verify_detects_damage(tmp_path, cli):
    make_basename_dataset(str(tmp_path / "src"), 20)
    dst = str(tmp_path / "out")
    pack_in_process(str(tmp_path / "src"), dst, shard_size=256 << 20)
    before = tree_bytes(dst)
    again = cli(["pack", str(tmp_path / "src"), dst])
    assert again.returncode == 2 and "already holds a finished pack" in again.stderr
    assert tree_bytes(dst) == before
    forced = cli(["pack", str(tmp_path / "src"), dst, "--force"])
    assert forced.returncode == 0 and tree_bytes(dst) == before  # same input, same bytes
    shard = os.path.join(dst, "shard-000000.tar")
    data = bytearray(open(shard, "rb").read())
    data[700] ^= 0xFF  # inside the first member's bytes
    open(shard, "wb").write(bytes(data))
    check = cli(["pack", str(tmp_path / "src"), dst, "--verify"])
    assert check.returncode == 2 and "verify failed: shard-000000.tar" in check.stderr


def test_force_never_deletes_foreign_files(tmp_path, cli):
    make_basename_dataset(str(tmp_path / "src"), 5)
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "precious.txt").write_text("mine")
    done = cli(["pack", str(tmp_path / "src"), str(dst), "--force"])
    assert done.returncode == 2 and "did not write (precious.txt)" in done.stderr
    assert os.listdir(dst) == ["precious.txt"]


def _kill_midway(cmd: list[str], dst: str, fmt: str) -> None:
    """Start pack in a child, SIGKILL it once part of the output exists (and before it finishes)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "supplyline", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    env_file = os.path.join(dst, ".supplyline-pack", "lmdb", "data.mdb")
    while proc.poll() is None:
        if fmt == "webdataset":
            progressed = os.path.isdir(dst) and sum(n.endswith(".tar") for n in os.listdir(dst)) >= 3
        else:
            progressed = os.path.exists(env_file) and os.path.getsize(env_file) > (1 << 20)
        if progressed:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "pack finished before it could be interrupted"
    assert not os.path.exists(os.path.join(dst, "manifest.json"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_sigkilled_pack_resumes_to_an_identical_result(tmp_path, cli, fmt):
    expected = make_basename_dataset(str(tmp_path / "src"), 800, size=3000)
    src, reference, resumed = str(tmp_path / "src"), str(tmp_path / "ref"), str(tmp_path / "resumed")
    args = ["--format", fmt, "--shard-size", "64KB"]
    pack_in_process(src, reference, fmt, 64 << 10)
    _kill_midway(["pack", src, resumed, *args], resumed, fmt)
    if fmt == "webdataset":
        for name in os.listdir(resumed):  # whatever looks complete is complete
            if name.endswith(".tar"):
                assert (
                    open(os.path.join(resumed, name), "rb").read() == open(os.path.join(reference, name), "rb").read()
                )
    done = cli(["pack", src, resumed, *args, "--verify"])
    assert done.returncode == 0, done.stderr
    assert "resumed and finished" in done.stdout
    ref_manifest = json.load(open(os.path.join(reference, "manifest.json")))
    new_manifest = json.load(open(os.path.join(resumed, "manifest.json")))
    if fmt == "webdataset":
        assert tree_bytes(resumed) == tree_bytes(reference)  # every shard and the manifest, byte for byte
    else:
        for a, b in zip(ref_manifest["shards"], new_manifest["shards"]):
            assert (a["samples"], a["content_sha256"]) == (b["samples"], b["content_sha256"])
        assert [s["__key__"] for s in LMDBDataset(resumed)] == [s["__key__"] for s in LMDBDataset(reference)]
    assert _read_all(resumed, fmt) == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_nearly_full_file_system_fails_cleanly(tmp_path, cli, small_mount, fmt):
    make_basename_dataset(str(tmp_path / "src"), 40, size=80_000)  # ~3 MiB into a 2 MiB tmpfs
    mount = small_mount("size=2m")
    dst = os.path.join(mount, "out")
    done = cli(["pack", str(tmp_path / "src"), dst, "--format", fmt])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "free" in done.stderr and done.stderr.count("\n") == 1
    assert os.listdir(mount) == []


def test_running_out_mid_write_removes_the_partial_output(tmp_path, small_mount):
    # Space enough by the estimate, but only a handful of inodes: the fifth shard cannot be created.
    make_basename_dataset(str(tmp_path / "src"), 40, size=3000)
    mount = small_mount("size=4m,nr_inodes=8")
    with pytest.raises(UserError, match="removed the partial output"):
        pack_in_process(str(tmp_path / "src"), os.path.join(mount, "out"), shard_size=8 << 10)
    assert os.listdir(mount) == []


def test_bad_input(tmp_path, cli):
    missing = cli(["pack", str(tmp_path / "nope"), str(tmp_path / "out")])
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = cli(["pack", str(tmp_path / "empty"), str(tmp_path / "out")])
    assert empty.returncode == 2 and "holds no files" in empty.stderr
    nosamples = tmp_path / "nosamples"
    nosamples.mkdir()
    (nosamples / "README").write_text("x")
    (nosamples / ".hidden").write_text("x")
    none = cli(["pack", str(nosamples), str(tmp_path / "out")])
    assert none.returncode == 2 and "holds no samples" in none.stderr
    for done in (missing, empty, none):
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
def test_unreadable_files_are_counted_listed_and_skipped(tmp_path, cli):
    expected = make_basename_dataset(str(tmp_path / "src"), 6)
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "src" / "part0" / "99999.bin"))
    os.mkfifo(str(tmp_path / "src" / "part1" / "88888.bin"))
    dst = str(tmp_path / "out")
    done = cli(["pack", str(tmp_path / "src"), dst])
    assert done.returncode == 0, done.stderr
    assert "skipped 2:" in done.stdout and "dangling symlink" in done.stdout and "FIFO" in done.stdout
    manifest = json.load(open(os.path.join(dst, "manifest.json")))
    assert {s["path"] for s in manifest["skipped"]} == {"part0/99999.bin", "part1/88888.bin"}
    assert _read_all(dst, "webdataset") == expected


def test_shard_reader_uses_webdataset_names(tmp_path):
    make_basename_dataset(str(tmp_path / "src"), 3)
    dst = str(tmp_path / "out")
    pack_in_process(str(tmp_path / "src"), dst, seed=None)
    keys = [s["__key__"] for s in iter_shard_samples(os.path.join(dst, "shard-000000.tar"))]
    assert keys == ["part0/00000", "part0/00002", "part1/00001"]
    import tarfile

    names = tarfile.open(os.path.join(dst, "shard-000000.tar")).getnames()
    assert names[:2] == ["part0/00000.bin", "part0/00000.cls"]


def test_dst_inside_src_is_refused(tmp_path, cli):
    make_basename_dataset(str(tmp_path / "src"), 3)
    done = cli(["pack", str(tmp_path / "src"), str(tmp_path / "src" / "out")])
    assert done.returncode == 2 and "inside SRC" in done.stderr
    assert not os.path.exists(tmp_path / "src" / "out")

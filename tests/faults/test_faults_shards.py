"""Packed datasets under faults: real flipped bits, cut-off shards, missing files, an interrupted
pack (a real SIGKILL) and a damaged LMDB. Corruption is never delivered silently: header damage
and truncation always raise, data damage raises with verify=True, each naming shard and offset."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tarfile

import pytest
from faults_helpers import assert_one_line, start_supplyline, supplyline, wait_for

from supplyline.datasets.manifest import PackError
from supplyline.datasets.shards import ShardDataset

SAMPLES = 60


def _source(root: str, samples: int = SAMPLES) -> str:
    os.makedirs(root)
    for i in range(samples):
        with open(os.path.join(root, f"s{i:05d}.jpg"), "wb") as fh:
            fh.write(os.urandom(3000))
        with open(os.path.join(root, f"s{i:05d}.cls"), "w") as fh:
            fh.write(str(i % 7))
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("packs")
    src = _source(str(base / "src"))
    wds, lmdb = str(base / "wds"), str(base / "lmdb")
    for dst, fmt in ((wds, "webdataset"), (lmdb, "lmdb")):
        done = supplyline(["pack", src, dst, "--format", fmt, "--shard-size", "64KB", "--no-shuffle"])
        assert done.returncode == 0, done.stderr
    return {"src": src, "wds": wds, "lmdb": lmdb}


@pytest.fixture
def pack(pristine, tmp_path) -> str:
    dst = str(tmp_path / "wds")
    shutil.copytree(pristine["wds"], dst)
    return dst


def _manifest(dst: str) -> dict:
    with open(os.path.join(dst, "manifest.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _shard(dst: str, index: int = 1) -> str:
    return os.path.join(dst, _manifest(dst)["shards"][index]["name"])


def _member(path: str, index: int) -> tarfile.TarInfo:
    with tarfile.open(path) as tar:
        return tar.getmembers()[index]


def _flip(path: str, offset: int, mask: int = 0x01) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ mask]))


def _read_until_error(dataset: ShardDataset) -> tuple[list[str], PackError]:
    keys: list[str] = []
    with pytest.raises(PackError) as raised:
        for sample in dataset:
            keys.append(sample["__key__"])
    return keys, raised.value


def test_the_pristine_pack_reads_back_whole(pack):
    assert len(list(ShardDataset(pack, verify=True))) == SAMPLES
    assert len(_manifest(pack)["shards"]) >= 3


def test_flipped_bit_in_a_member_name_is_caught_with_its_offset(pack):
    shard = _shard(pack)
    header = _member(shard, 2).offset_data - 512
    _flip(shard, header + 3)  # inside the name field: would split a sample in two
    _, error = _read_until_error(ShardDataset(pack))
    assert os.path.basename(shard) in str(error) and f"tar header at byte {header} is corrupt" in str(error)


def test_changed_size_field_is_caught(pack):
    shard = _shard(pack)
    header = _member(shard, 0).offset_data - 512
    _flip(shard, header + 124 + 8, 0x02)  # a size digit: would silently drop the samples after it
    _, error = _read_until_error(ShardDataset(pack))
    assert f"byte {header}" in str(error)


def test_flipped_data_byte_is_caught_with_verify_before_any_sample_of_the_shard(pack):
    shard = _shard(pack)
    _flip(shard, _member(shard, 3).offset_data + 100)
    keys, error = _read_until_error(ShardDataset(pack, verify=True))
    assert os.path.basename(shard) in str(error) and "does not match its sha256" in str(error)
    first_key = _manifest(pack)["shards"][1]["first_key"]
    assert first_key not in keys  # nothing from the damaged shard was delivered


def test_truncated_shard_is_caught(pack):
    shard = _shard(pack)
    os.truncate(shard, os.path.getsize(shard) // 2 + 100)
    _, error = _read_until_error(ShardDataset(pack))
    assert os.path.basename(shard) in str(error) and "truncated" in str(error)


def test_shard_cut_at_a_member_boundary_is_caught(pack):
    shard = _shard(pack)
    os.truncate(shard, _member(shard, 4).offset_data - 512)  # no end-of-archive marker
    _, error = _read_until_error(ShardDataset(pack))
    assert "without tar's end-of-archive marker" in str(error)


def test_missing_shard_is_named(pack):
    shard = _shard(pack)
    os.unlink(shard)
    _, error = _read_until_error(ShardDataset(pack))
    assert f"shard {shard} is missing" in str(error)


def test_pack_verify_names_the_damaged_shard(pack):
    shard = _shard(pack)
    _flip(shard, _member(shard, 3).offset_data + 100)
    done = supplyline(["pack", "unused-src", pack, "--verify"])
    assert_one_line(done, 2, os.path.basename(shard), "sha256")


def test_missing_directory_and_not_a_pack_are_one_clear_error(tmp_path):
    with pytest.raises(PackError, match="does not exist"):
        ShardDataset(str(tmp_path / "nope"))
    with pytest.raises(PackError, match="not a finished supplyline pack"):
        ShardDataset(str(tmp_path))
    with pytest.raises(PackError, match="verify=True needs a pack directory"):
        ShardDataset([str(tmp_path / "a.tar")], verify=True)


@pytest.mark.slow
def test_interrupted_pack_says_so_and_a_rerun_finishes_it(tmp_path):
    src = _source(str(tmp_path / "src"), 3000)
    dst = str(tmp_path / "wds")
    args = ["pack", src, dst, "--shard-size", "64KB", "--no-shuffle"]
    proc = start_supplyline(args)
    journal = os.path.join(dst, ".supplyline-pack", "journal.json")
    wait_for(lambda: os.path.exists(journal) or proc.poll() is not None, "the pack to start")
    if proc.poll() is not None:
        pytest.skip("the pack finished before it could be killed")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    with pytest.raises(PackError, match=r"interrupted pack .* rerun the same `supplyline pack`"):
        ShardDataset(dst)
    done = supplyline(args)
    assert done.returncode == 0, done.stderr
    keys = sorted(s["__key__"] for s in ShardDataset(dst, verify=True))
    assert keys == [f"s{i:05d}" for i in range(3000)]  # nothing lost, nothing twice


def test_lmdb_missing_key_names_the_sample(pristine, tmp_path):
    import lmdb

    from supplyline.datasets.lmdb_dataset import LMDBDataset

    dst = str(tmp_path / "lmdb")
    shutil.copytree(pristine["lmdb"], dst)
    env = lmdb.open(dst, subdir=True)
    with env.begin(write=True) as txn:
        txn.delete(b"%010d" % 5)
    env.close()
    dataset = LMDBDataset(dst)
    assert dataset[4]["__key__"]
    with pytest.raises(PackError, match=r"sample 5 \(key 0000000005\) is missing .* pack --verify"):
        dataset[5]


def test_lmdb_interrupted_pack_says_so(tmp_path):
    from supplyline.datasets.lmdb_dataset import LMDBDataset

    dst = tmp_path / "lmdb"
    (dst / ".supplyline-pack" / "lmdb").mkdir(parents=True)
    with pytest.raises(PackError, match="interrupted pack"):
        LMDBDataset(str(dst))

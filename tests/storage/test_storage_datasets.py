"""ShardDataset and LMDBDataset in real DataLoaders: every sample exactly once, bytes intact."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections import Counter

import pytest
from storage_helpers import make_basename_dataset, pack_in_process
from torch.utils.data import DataLoader

from supplyline.datasets import LMDBDataset, ShardDataset
from supplyline.datasets.shards import assignment


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """60 samples in 12 small shards, and the same samples in an LMDB."""
    root = tmp_path_factory.mktemp("packed")
    expected = make_basename_dataset(str(root / "src"), 60, size=1500)
    manifest = pack_in_process(str(root / "src"), str(root / "wds"), "webdataset", 8 << 10)
    pack_in_process(str(root / "src"), str(root / "lmdb"), "lmdb")
    return {
        "expected": expected,
        "wds": str(root / "wds"),
        "lmdb": str(root / "lmdb"),
        "shards": [os.path.join(root, "wds", s["name"]) for s in manifest["shards"]],
    }


def _keys_over_ranks(dataset, ranks: int, workers: int, monkeypatch) -> Counter:
    seen: Counter = Counter()
    for rank in range(ranks):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(ranks))
        for sample in DataLoader(dataset, batch_size=None, num_workers=workers):
            seen[sample["__key__"]] += 1
    return seen


def test_every_sample_exactly_once_across_2_workers_x_2_ranks(packed, monkeypatch):
    assert len(packed["shards"]) >= 8
    seen = _keys_over_ranks(ShardDataset(packed["wds"]), ranks=2, workers=2, monkeypatch=monkeypatch)
    assert set(seen) == set(packed["expected"]) and set(seen.values()) == {1}


@pytest.mark.parametrize("shards", [1, 3, 5])
def test_fewer_or_uneven_shards_still_exactly_once(packed, monkeypatch, shards):
    subset = packed["shards"][:shards]
    from supplyline.datasets.shards import iter_shard_samples

    wanted = [s["__key__"] for p in subset for s in iter_shard_samples(p)]
    seen = _keys_over_ranks(ShardDataset(subset), ranks=2, workers=2, monkeypatch=monkeypatch)
    assert sorted(seen.elements()) == sorted(wanted)


def test_assignment_partitions_positions():
    for shards in range(1, 9):
        for consumers in range(1, 9):
            owner: Counter = Counter()
            for c in range(consumers):
                for shard, stride, offset in assignment(shards, c, consumers):
                    for position in range(24):
                        if position % stride == offset:
                            owner[(shard, position)] += 1
            assert owner == Counter({(s, p): 1 for s in range(shards) for p in range(24)})


def test_shuffle_buffer_changes_order_not_content(packed):
    plain = [s["__key__"] for s in ShardDataset(packed["wds"])]
    shuffled = [s["__key__"] for s in ShardDataset(packed["wds"], shuffle_buffer=16, seed=1)]
    assert sorted(plain) == sorted(shuffled) and plain != shuffled
    dataset = ShardDataset(packed["wds"], shuffle_buffer=16, seed=1)
    dataset.set_epoch(1)
    assert [s["__key__"] for s in dataset] != shuffled


def test_shard_bytes_and_labels_through_workers(packed):
    got = {
        s["__key__"]: (s["bin"], int(s["cls"]))
        for s in DataLoader(ShardDataset(packed["wds"]), batch_size=None, num_workers=2)
    }
    assert got == {k: (v["bin"], int(v["cls"])) for k, v in packed["expected"].items()}


def test_lmdb_opens_lazily_per_worker_and_reads_everything_once(packed):
    dataset = LMDBDataset(packed["lmdb"])
    assert len(dataset) == 60 and dataset._env is None
    got = Counter()
    data = {}
    for batch in DataLoader(dataset, batch_size=None, num_workers=2, shuffle=True):
        got[batch["__key__"]] += 1
        data[batch["__key__"]] = {k: v for k, v in batch.items() if not k.startswith("__")}
    assert dataset._env is None  # the main process never opened it; the workers did
    assert set(got.values()) == {1} and data == packed["expected"]
    first = dataset[0]  # opening in the main process works too, and is not pickled along
    assert dataset._env is not None and pickle.loads(pickle.dumps(dataset))._env is None
    assert first == dataset[-len(dataset)]


def test_readers_refuse_the_other_format(packed):
    with pytest.raises(ValueError, match="use LMDBDataset"):
        ShardDataset(packed["lmdb"])
    with pytest.raises(ValueError, match="use ShardDataset"):
        LMDBDataset(packed["wds"])


_DIST_SCRIPT = r"""
import json, os, sys
import torch.distributed as dist
from torch.utils.data import DataLoader
from supplyline.datasets import ShardDataset
rank = int(sys.argv[1])
for name in ("RANK", "WORLD_SIZE"):
    os.environ.pop(name, None)  # only torch.distributed may tell the dataset who we are
dist.init_process_group("gloo", rank=rank, world_size=2)
keys = [s["__key__"] for s in DataLoader(ShardDataset(sys.argv[2]), batch_size=None, num_workers=2)]
gathered = [None, None]
dist.all_gather_object(gathered, keys)
if rank == 0:
    print(json.dumps(gathered))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_split_follows_torch_distributed_when_initialized(packed, tmp_path):
    import json
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "dist_probe.py"
    script.write_text(_DIST_SCRIPT)
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), packed["wds"]],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    per_rank = json.loads(outs[0][0].strip().splitlines()[-1])
    assert all(per_rank) and not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == sorted(packed["expected"])


@pytest.mark.parametrize("fmt", ["USTAR_FORMAT", "GNU_FORMAT", "PAX_FORMAT"])
def test_tar_member_reader_agrees_with_tarfile(fmt):
    import io
    import tarfile

    from supplyline.datasets.shards import iter_tar_members

    members = [
        ("deep/" * 30 + "x.jpg", b"1" * 700),
        ("short.cls", b"3"),
        ("empty.bin", b""),
        ("n" * 90 + "/" + "m" * 90 + ".txt", b"long name" * 100),
    ]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=getattr(tarfile, fmt)) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        folder = tarfile.TarInfo("a-folder")
        folder.type = tarfile.DIRTYPE
        tf.addfile(folder)
    buf.seek(0)
    assert list(iter_tar_members(buf)) == members

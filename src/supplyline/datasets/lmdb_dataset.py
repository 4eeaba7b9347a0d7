"""``LMDBDataset``: map-style access to what ``supplyline pack --format lmdb`` wrote.

The LMDB environment is opened lazily, in the process that first reads (each DataLoader worker),
read-only, without the lock file and without readahead: an environment opened before the workers
fork hangs or crashes them (pytorch/vision#689), and readahead wastes page cache on random access.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import Dataset

from supplyline.datasets.manifest import MANIFEST, PackError, load_pack_manifest
from supplyline.datasets.records import decode_record


def _open(path: str) -> Any:
    import lmdb

    return lmdb.open(path, subdir=True, readonly=True, lock=False, readahead=False, meminit=False, max_readers=2048)


def _length(path: str) -> int:
    if os.path.exists(os.path.join(path, MANIFEST)) or not os.path.exists(os.path.join(path, "data.mdb")):
        # No data.mdb: an interrupted pack, a wrong path, or a webdataset pack; the manifest says which.
        return int(load_pack_manifest(path, "lmdb")["samples"])
    env = _open(path)  # no manifest: read the count, and close before any worker starts
    try:
        with env.begin() as txn:
            return int(txn.get(b"__len__", b"0"))
    finally:
        env.close()


class LMDBDataset(Dataset):
    """``dataset[i]`` -> ``{"__key__": str, "<field>": bytes, ...}`` (after ``transform`` if given)."""

    def __init__(self, path: str, transform: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.path = path
        self.transform = transform
        self._length = _length(path)
        self._env: Any = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return self._length

    def _environment(self) -> Any:
        if self._env is None or self._pid != os.getpid():
            self._env = _open(self.path)
            self._pid = os.getpid()
        return self._env

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"index {index} out of range for {self._length} samples")
        key = b"%010d" % index
        with self._environment().begin(buffers=True) as txn:
            value = txn.get(key)
            if value is None:
                raise PackError(
                    f"{self.path}: sample {index} (key {key.decode()}) is missing although the pack "
                    f"counts {self._length}: the LMDB is damaged or was changed; `supplyline pack --verify` "
                    "checks it, packing again repairs it"
                )
            sample = decode_record(value)
        return self.transform(sample) if self.transform else sample

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_env"], state["_pid"] = None, None  # never ship an open environment to a worker
        return state


def iter_lmdb_samples(path: str) -> Iterator[dict[str, Any]]:
    """Every sample in order, for verification."""
    dataset = LMDBDataset(path)
    for i in range(len(dataset)):
        yield dataset[i]

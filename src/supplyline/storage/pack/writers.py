"""The two writers of ``supplyline pack``: webdataset tar shards and one LMDB environment.

Both continue from the journal after an interruption, and produce the same result as an
uninterrupted run: tar shards byte for byte (fixed mtime, deterministic order and cut points),
LMDB record for record.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from supplyline.datasets.records import EMPTY_CHAIN, chain, encode_record, sample_digest
from supplyline.storage.pack.samples import Plan, read_sample
from supplyline.storage.pack.state import State, fsync_path

Advance = Callable[[int], None]  # called with the plan index reached


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read(plan: Plan, index: int, skipped: list[list[str]]) -> dict[str, object] | None:
    try:
        return read_sample(plan.samples[index])
    except OSError as exc:
        skipped.append([plan.samples[index].key, exc.strerror or str(exc)])
        return None


def write_webdataset(plan: Plan, state: State, shard_size: int, advance: Advance) -> None:
    """Shards via webdataset's ShardWriter into the state folder; each finished one is checksummed,
    fsynced and renamed into DST, then recorded in the journal."""
    import webdataset as wds

    shards: list[dict[str, Any]] = state.journal["shards"]
    start = shards[-1]["end"] if shards else 0
    for name in os.listdir(state.dir):
        if name.endswith(".partial"):
            os.unlink(os.path.join(state.dir, name))  # a shard cut short by the interruption
    if start >= len(plan.samples):
        return
    current: dict[str, Any] = {"first": start, "samples": 0, "digest": EMPTY_CHAIN, "skipped": []}
    position = [start]

    def post(fname: str) -> None:
        final = os.path.join(state.dst, os.path.basename(fname)[: -len(".partial")])
        if current["samples"] == 0:
            os.unlink(fname)  # every sample in it failed to read: no empty shard
        else:
            fsync_path(fname)
            entry = {
                "name": os.path.basename(final),
                "samples": current["samples"],
                "bytes": os.path.getsize(fname),
                "sha256": file_sha256(fname),
                "content_sha256": current["digest"].hex(),
                "first_key": current["first_key"],
            }
            os.replace(fname, final)
            fsync_path(state.dst)
            shards.append({**entry, "start": current["first"], "end": position[0], "skipped": current["skipped"]})
            state.save()
        current.update(first=position[0], samples=0, digest=EMPTY_CHAIN, skipped=[])

    pattern = os.path.join(state.dir.replace("%", "%%"), "shard-%06d.tar.partial")
    # mtime=0 and a fixed tar format make the bytes reproducible; GNU format allows long keys.
    writer = wds.ShardWriter(
        pattern,
        maxsize=shard_size,
        maxcount=10**12,
        post=post,
        start_shard=len(shards),
        verbose=0,
        encoder=False,
        mtime=0,
        format="GNU_FORMAT",
    )
    try:
        for index in range(start, len(plan.samples)):
            sample = _read(plan, index, current["skipped"])
            if sample is not None:
                position[0] = index
                writer.write(sample)  # may finish the previous shard first (post), then writes this one
                if current["samples"] == 0:
                    current["first_key"] = sample["__key__"]
                current["samples"] += 1
                current["digest"] = chain(current["digest"], sample_digest(sample))
            advance(index + 1)
        position[0] = len(plan.samples)
        writer.close()
    except BaseException:
        _close_quietly(writer)
        raise


def _close_quietly(writer: Any) -> None:
    stream = getattr(writer, "tarstream", None)
    if stream is not None:
        try:
            stream.close()
        except Exception:
            pass


LMDB_COMMIT_SAMPLES = 256
LMDB_COMMIT_BYTES = 32 << 20


def write_lmdb(plan: Plan, state: State, map_size: int, advance: Advance) -> None:
    """Records ``%010d`` -> encoded sample, committed in batches; each commit also stores where to
    resume and the running checksum, so progress and data are saved atomically together."""
    import lmdb

    env_dir = os.path.join(state.dir, "lmdb")
    env = lmdb.open(env_dir, map_size=map_size, subdir=True, meminit=False)
    try:
        with env.begin() as txn:
            start = int(txn.get(b"__next_plan__", b"0"))
            count = int(txn.get(b"__len__", b"0"))
            digest = txn.get(b"__chain__", EMPTY_CHAIN)
            skipped = _json_get(txn, b"__skipped__")
        txn = env.begin(write=True)
        batch_samples = batch_bytes = 0
        try:
            for index in range(start, len(plan.samples)):
                sample = _read(plan, index, skipped)
                if sample is not None:
                    record = encode_record(sample)
                    txn.put(b"%010d" % count, record)
                    count += 1
                    digest = chain(digest, sample_digest(sample))
                    batch_samples += 1
                    batch_bytes += len(record)
                if (
                    batch_samples >= LMDB_COMMIT_SAMPLES
                    or batch_bytes >= LMDB_COMMIT_BYTES
                    or index + 1 == len(plan.samples)
                ):
                    _put_progress(txn, index + 1, count, digest, skipped)
                    txn.commit()
                    txn = env.begin(write=True)
                    batch_samples = batch_bytes = 0
                advance(index + 1)
        finally:
            txn.abort()
        env.sync(True)
    finally:
        env.close()
    os.replace(os.path.join(env_dir, "data.mdb"), os.path.join(state.dst, "data.mdb"))
    fsync_path(state.dst)
    state.journal["lmdb"] = {"samples": count, "content_sha256": digest.hex(), "skipped": skipped}


def _put_progress(txn: Any, next_plan: int, count: int, digest: bytes, skipped: list[list[str]]) -> None:
    import json

    txn.put(b"__next_plan__", str(next_plan).encode())
    txn.put(b"__len__", str(count).encode())
    txn.put(b"__chain__", digest)
    txn.put(b"__skipped__", json.dumps(skipped).encode())


def _json_get(txn: Any, key: bytes) -> list[list[str]]:
    import json

    raw = txn.get(key)
    return json.loads(raw) if raw else []

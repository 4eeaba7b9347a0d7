"""``pack --verify``: read a finished pack back and compare it with the manifest's checksums."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from supplyline.datasets.records import EMPTY_CHAIN, chain, sample_digest
from supplyline.errors import UserError
from supplyline.storage.pack.state import MANIFEST
from supplyline.storage.pack.writers import file_sha256


def load_manifest(dst: str) -> dict[str, Any]:
    try:
        with open(os.path.join(dst, MANIFEST), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise UserError(f"{dst} holds no finished pack (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {os.path.join(dst, MANIFEST)}: {exc}") from exc


def verify(dst: str, advance: Callable[[int], None] = lambda n: None) -> int:
    """Check every shard's file checksum and every sample's content; the number of samples checked.
    Raises UserError naming the first mismatch."""
    from supplyline.datasets.lmdb_dataset import iter_lmdb_samples
    from supplyline.datasets.shards import iter_shard_samples

    manifest = load_manifest(dst)
    checked = 0
    for shard in manifest["shards"]:
        path = os.path.join(dst, shard["name"])
        if not os.path.exists(path):
            raise UserError(f"verify failed: {shard['name']} is missing")
        if file_sha256(path) != shard["sha256"]:
            raise UserError(f"verify failed: {shard['name']} does not match its sha256 in the manifest")
        samples = iter_shard_samples(path) if manifest["format"] == "webdataset" else iter_lmdb_samples(dst)
        digest, count = EMPTY_CHAIN, 0
        for sample in samples:
            digest = chain(digest, sample_digest(sample))
            count += 1
            advance(checked + count)
        if count != shard["samples"] or digest.hex() != shard["content_sha256"]:
            raise UserError(
                f"verify failed: the samples in {shard['name']} differ from those packed "
                f"({count} read, {shard['samples']} expected)"
            )
        checked += count
    if checked != manifest["samples"]:
        raise UserError(f"verify failed: {checked} samples read, the manifest says {manifest['samples']}")
    return checked

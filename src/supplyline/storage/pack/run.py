"""``supplyline pack``: plan, check space, write (resumably), write the manifest, optionally verify."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supplyline import __version__
from supplyline.errors import UserError
from supplyline.storage.pack.samples import LABEL_FIELD, Plan, estimated_bytes
from supplyline.storage.pack.state import State, discard, finish, prepare
from supplyline.storage.pack.writers import file_sha256, write_lmdb, write_webdataset

FORMATS = ("webdataset", "lmdb")


@dataclass
class PackResult:
    manifest: dict[str, Any]
    resumed: bool


def space_check(plan: Plan, dst: str, fmt: str) -> int:
    """Refuse before writing anything when DST's file system cannot hold the pack."""
    needed = estimated_bytes(plan, fmt)
    probe = dst
    while not os.path.exists(probe):
        probe = os.path.dirname(probe) or "."
    free = shutil.disk_usage(probe).free
    if needed > free:
        from supplyline.units import human_bytes

        raise UserError(
            f"{dst}: the pack needs about {human_bytes(needed)} but its file system has "
            f"{human_bytes(free)} free; nothing was written"
        )
    return needed


def pack(
    plan: Plan, dst: str, fmt: str, shard_size: int, force: bool, seed: int | None, advance: Callable[[int], None]
) -> PackResult:
    import lmdb

    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)}")
    target = os.path.abspath(dst)
    if target == plan.source or target.startswith(plan.source.rstrip("/") + "/"):
        raise UserError(f"DST {dst} is inside SRC; choose a place outside it")
    params = {"source": plan.source, "format": fmt, "shard_size": shard_size, "layout": plan.layout, "seed": seed}
    needed = space_check(plan, dst, fmt)
    state, resumed = prepare(dst, params, plan.fingerprint, force)
    try:
        if fmt == "webdataset":
            write_webdataset(plan, state, shard_size, advance)
        else:
            write_lmdb(plan, state, map_size=max(2 * needed, 1 << 20) + (64 << 20), advance=advance)
        manifest = _manifest(plan, state, fmt, shard_size, seed)
        finish(state, manifest)
    except KeyboardInterrupt:
        raise UserError(
            f"interrupted; {dst} keeps the finished part: run the same command again to resume", code=130
        ) from None
    except (OSError, UserError, lmdb.Error) as exc:
        discard(state)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot write {dst}: {reason}; removed the partial output") from exc
    return PackResult(manifest, resumed)


def _manifest(plan: Plan, state: State, fmt: str, shard_size: int, seed: int | None) -> dict[str, Any]:
    if fmt == "webdataset":
        shards = [
            {k: s[k] for k in ("name", "samples", "bytes", "sha256", "content_sha256", "first_key")}
            for s in state.journal["shards"]
        ]
        read_errors = [e for s in state.journal["shards"] for e in s["skipped"]]
    else:
        info = state.journal["lmdb"]
        path = os.path.join(state.dst, "data.mdb")
        shards = [
            {
                "name": "data.mdb",
                "samples": info["samples"],
                "bytes": os.path.getsize(path),
                "sha256": file_sha256(path),
                "content_sha256": info["content_sha256"],
                "first_key": None,
            }
        ]
        read_errors = info["skipped"]
    samples = sum(s["samples"] for s in shards)
    if samples == 0:
        raise UserError("no sample could be read")
    return {
        "format": fmt,
        "version": 1,
        "created_by": f"supplyline {__version__}",
        "samples": samples,
        "layout": plan.layout,
        "classes": plan.classes,
        "label_field": LABEL_FIELD if plan.classes else None,
        "shard_size": shard_size if fmt == "webdataset" else None,
        "shuffle_seed": seed,
        "source": {"path": plan.source, "files": plan.files, "bytes": plan.total_bytes},
        "shards": shards,
        "skipped": [{"path": p, "reason": r} for p, r in plan.skipped]
        + [{"path": k, "reason": r} for k, r in read_errors],
    }

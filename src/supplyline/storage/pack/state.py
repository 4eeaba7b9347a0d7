"""DST bookkeeping for ``supplyline pack``: refuse, overwrite, or resume; and clean up after failure.

DST layout while packing::

    DST/.supplyline-pack/journal.json   parameters, source fingerprint, finished shards
    DST/.supplyline-pack/*.partial      the shard being written (or the LMDB environment)
    DST/shard-000000.tar ...            finished shards, renamed in only once complete
    DST/manifest.json                   written last: its presence means the pack is complete
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

from supplyline.atomic import atomic_write_json
from supplyline.datasets.manifest import MANIFEST, STATE_DIR
from supplyline.errors import UserError

_OURS = re.compile(r"^(manifest\.json|\.supplyline-pack|shard-\d{6}\.tar|data\.mdb|lock\.mdb)$")


@dataclass
class State:
    dst: str
    journal: dict[str, Any]

    @property
    def dir(self) -> str:
        return os.path.join(self.dst, STATE_DIR)

    def save(self) -> None:
        atomic_write_json(os.path.join(self.dir, "journal.json"), self.journal)


def prepare(dst: str, params: dict[str, Any], fingerprint: str, force: bool) -> tuple[State, bool]:
    """The state to pack into, and whether it resumes an interrupted pack.

    Refuses (UserError) to touch a DST that holds a finished pack or other files without
    ``--force``, and never deletes files that ``pack`` did not write, even with it.
    """
    if os.path.exists(dst) and not os.path.isdir(dst):
        raise UserError(f"{dst} is a file; DST must be a directory (new or empty)")
    created = not os.path.exists(dst)
    if not created:
        entries = sorted(os.listdir(dst))
        foreign = [e for e in entries if not _OURS.match(e)]
        journal = _load_journal(dst)
        if MANIFEST in entries and not force:
            raise UserError(f"{dst} already holds a finished pack; --force overwrites it, --verify checks it")
        if journal is not None and MANIFEST not in entries and not force:
            if journal.get("params") == params and journal.get("fingerprint") == fingerprint:
                return State(dst, journal), True
            raise UserError(
                f"{dst} holds an interrupted pack of a different source or options; "
                f"rerun with those, or --force to start over"
            )
        if entries and not force:
            raise UserError(f"{dst} exists and is not empty; --force overwrites it")
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise UserError(f"{dst} holds files supplyline pack did not write ({shown}); choose a new or empty DST")
        created = bool(journal and journal.get("created_dst"))
        remove_outputs(dst)
    try:
        os.makedirs(os.path.join(dst, STATE_DIR), exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {dst}: {exc.strerror or exc}") from exc
    state = State(
        dst, {"version": 1, "params": params, "fingerprint": fingerprint, "created_dst": created, "shards": []}
    )
    state.save()
    return state, False


def _load_journal(dst: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(dst, STATE_DIR, "journal.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def remove_outputs(dst: str) -> None:
    """Delete what ``pack`` writes in DST (and nothing else)."""
    for name in os.listdir(dst):
        if _OURS.match(name):
            path = os.path.join(dst, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                _unlink(path)


def discard(state: State) -> None:
    """After a failure: remove every output, and DST itself if this pack created it."""
    if not os.path.isdir(state.dst):
        return
    remove_outputs(state.dst)
    if state.journal.get("created_dst"):
        try:
            os.rmdir(state.dst)
        except OSError:
            pass


def finish(state: State, manifest: dict[str, Any]) -> None:
    """Write the manifest (the pack is complete from this moment), then drop the state folder."""
    atomic_write_json(os.path.join(state.dst, MANIFEST), manifest)
    shutil.rmtree(state.dir, ignore_errors=True)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

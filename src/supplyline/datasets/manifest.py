"""Reading a pack's ``manifest.json``, and the one error type the datasets raise for a damaged or
unfinished pack (a ValueError to callers; one line, not a traceback, in supplyline's commands)."""

from __future__ import annotations

import json
import os
from typing import Any

from supplyline.errors import UserError

MANIFEST = "manifest.json"
STATE_DIR = ".supplyline-pack"  # where pack keeps its journal until the pack is complete


class PackError(UserError, ValueError):
    """A pack that cannot be read as it is: unfinished, damaged, or of the other format. The
    message names the file (and the byte offset, when there is one) and what to do."""


def load_pack_manifest(path: str, fmt: str) -> dict[str, Any]:
    """The manifest of the ``fmt`` pack in directory ``path``; PackError when there is none."""
    manifest_path = os.path.join(path, MANIFEST)
    try:
        with open(manifest_path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        raise PackError(_why_no_manifest(path)) from None
    except (OSError, ValueError) as exc:
        raise PackError(f"cannot read {manifest_path}: {exc}; run `supplyline pack --verify` on it") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("shards"), list):
        raise PackError(f"{manifest_path} is not a supplyline pack manifest")
    if manifest.get("format") != fmt:
        other = "LMDBDataset" if fmt == "webdataset" else "ShardDataset"
        raise PackError(f"{path} holds a {manifest.get('format')} pack; use {other} for it")
    return manifest


def _why_no_manifest(path: str) -> str:
    if not os.path.exists(path):
        return f"{path} does not exist"
    if not os.path.isdir(path):
        return f"{path} is a file; pass the pack's directory (or a list of .tar shards)"
    if os.path.isdir(os.path.join(path, STATE_DIR)):
        return (
            f"{path} holds an interrupted pack (no {MANIFEST} yet): rerun the same `supplyline pack` "
            "command to finish it"
        )
    return f"{path} has no {MANIFEST}: it is not a finished supplyline pack"

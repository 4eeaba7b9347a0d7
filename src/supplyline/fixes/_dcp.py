"""The torch.distributed side of AsyncCheckpointer: ``torch.distributed.checkpoint.async_save``.

Each rank writes its own shards in DCP's directory format; rank 0 (the coordinator) renames
the finished directory into place and moves the pointer, as in the single-process case.
async_save needs a process group with a CPU backend (gloo) because its collectives run on a
background thread on CPU; when the default group has none (NCCL only) we make a gloo group.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

import torch
import torch.distributed as dist

from supplyline.errors import UserError
from supplyline.fixes._ckpt_files import fsync_dir, remove_path

# All ranks must agree on the temporary name, so it cannot carry a per-process pid.
DCP_TEMP_TAG = "ranks"


def distributed_active() -> bool:
    return dist.is_available() and dist.is_initialized()


def checkpoint_group() -> Any:
    """A process group async_save accepts. Collective: every rank must call it."""
    if not hasattr(_dcp(), "async_save"):
        raise UserError(
            f"AsyncCheckpointer: torch {torch.__version__} has no "
            "torch.distributed.checkpoint.async_save (needs torch >= 2.4)"
        )
    default = dist.group.WORLD
    device_types = getattr(default, "_device_types", None)
    if device_types is None or torch.device("cpu") in device_types:
        return default
    return dist.new_group(backend="gloo")


def is_coordinator(group: Any) -> bool:
    return dist.get_rank(group) == 0


def barrier(group: Any) -> None:
    dist.barrier(group=group)


def agree(decision: bool, group: Any) -> bool:
    """Rank 0's decision for every rank: a clock or a per-rank metric must not split the ranks,
    or some would enter the save's collectives and the others would never join."""
    flag = torch.tensor([1 if decision else 0], dtype=torch.int32)
    dist.broadcast(flag, src=dist.get_global_rank(group, 0), group=group)
    return bool(flag.item())


def start_save(state: dict[str, Any], temp_dir: str, group: Any) -> Future:
    """Stage ``state`` to CPU memory (synchronously: the copy is taken now) and write it in
    DCP's background thread; the future resolves when this rank's part is on disk."""
    result = _dcp().async_save(state, checkpoint_id=temp_dir, process_group=group)
    # Newer torch may return an AsyncSaveResponse holding the upload future.
    return getattr(result, "upload_completion", result)


def finish_save(future: Future, temp_dir: str, final_dir: str, coordinator: bool) -> None:
    """Wait for the write; the coordinator then renames the directory into place.

    On the coordinator the future resolves after DCP has gathered every rank's write results
    and written ``.metadata``, so all shards are complete when it renames.
    """
    try:
        future.result()
    except BaseException:
        if coordinator:
            remove_path(temp_dir)
        raise
    if coordinator:
        os.replace(temp_dir, final_dir)
        fsync_dir(os.path.dirname(final_dir))


def load_dcp(path: str, into: dict[str, Any] | None) -> dict[str, Any]:
    """Load a DCP directory: in place into ``into``, or whole into a new dict on this process."""
    dcp = _dcp()
    if into is not None:
        dcp.load(into, checkpoint_id=path)
        return into
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state: dict[str, Any] = {}
    _load_state_dict(
        state, storage_reader=dcp.FileSystemReader(path), planner=_EmptyStateDictLoadPlanner(), no_dist=True
    )
    return state


def _dcp() -> Any:
    import torch.distributed.checkpoint as dcp

    return dcp

"""The doctor as one rank of a torchrun job: who this process is, and how its record reaches the merge.

Each rank writes ``DIR/rank-K/record.json`` (and its own report files). The merge then happens
in the first of these ways that works:

1. Rank 0 gathers every rank's record through ``torch.distributed`` (``gather_object`` on a gloo
   group made for it, so NCCL jobs need no CUDA tensors and a dead peer costs a timeout, not a
   hang), writes the records that live on other nodes into its own ``DIR``, and merges.
   That needs the job's process group to still be up: a script that ran to its end has usually
   destroyed it, and a crashed job's group is broken.
2. Otherwise every rank checks, after writing its record, whether the records of all ranks of
   this job are now in ``DIR`` (one machine, or a shared filesystem); the one that completes the
   set merges (an exclusive lock file makes it exactly one).
3. Otherwise ``supplyline merge DIR`` (or ``supplyline report DIR``) merges afterwards, once the
   ``rank-K`` folders of all nodes are copied into one ``DIR``.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from supplyline.analyze.distributed import MergedReport
from supplyline.doctor.merged import STARTED_FILE
from supplyline.record import RunRecord

GATHER_TIMEOUT_S = 180.0  # covers a slow rank still draining its loader in the what-if phase


@dataclass
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    hostname: str
    master_addr: str
    master_port: str
    run_id: str
    restart_count: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> RankInfo | None:
        """The rank torchrun (or SLURM + init_process_group's env://) set up; None outside a launcher."""
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            return None
        try:
            rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        except ValueError:
            return None
        return cls(
            rank=rank,
            world_size=world,
            local_rank=int(environ.get("LOCAL_RANK", "0") or 0),
            local_world_size=int(environ.get("LOCAL_WORLD_SIZE", "1") or 1),
            node_rank=int(environ.get("GROUP_RANK", environ.get("NODE_RANK", "0")) or 0),
            hostname=socket.gethostname(),
            master_addr=environ.get("MASTER_ADDR", ""),
            master_port=environ.get("MASTER_PORT", ""),
            run_id=environ.get("TORCHELASTIC_RUN_ID", ""),
            restart_count=int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0),
        )

    @property
    def job_key(self) -> str:
        """Same on every rank of one launch, different for the next launch into the same DIR."""
        return f"{self.run_id}|{self.master_addr}:{self.master_port}|{self.world_size}|{self.restart_count}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "job_key": self.job_key}


def rank_dir(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"rank-{rank}")


class Terminated(BaseException):
    """SIGTERM from the launcher (torchrun stops the other ranks when one fails)."""


def write_started(out_dir: str, info: RankInfo) -> None:
    """Leave ``rank-K/started.json`` before the script runs: a rank killed outright (SIGKILL, the OOM
    killer) writes no record, and this is how the others and the merge learn it existed and died."""
    from supplyline.atomic import atomic_write_json

    try:
        created = psutil.Process().create_time()
        os.makedirs(rank_dir(out_dir, info.rank), exist_ok=True)
        atomic_write_json(
            os.path.join(rank_dir(out_dir, info.rank), STARTED_FILE),
            {"job_key": info.job_key, "pid": os.getpid(), "hostname": info.hostname, "create_time": created},
        )
    except (OSError, psutil.Error):  # the record is what matters; without the marker a kill is only "missing"
        pass


def finish_rank(record: RunRecord, info: RankInfo, out_dir: str, quiet: bool) -> MergedReport | None:
    """After this rank's record is on disk: merge, if this rank is the one that can. Returns the merged report."""
    from supplyline.doctor.merged import merge_dir

    healthy = record.outcome.reason in ("completed", "stopped", "sys_exit") and record.outcome.exit_code == 0
    gathered = _gather(record, info) if healthy else None
    if gathered is not None:
        if info.rank != 0:
            return None
        for rank, data in enumerate(gathered):
            path = os.path.join(rank_dir(out_dir, rank), "record.json")
            if data is not None and rank != info.rank and not _same_job_on_disk(path, info.job_key):
                from supplyline.atomic import atomic_write_json

                os.makedirs(rank_dir(out_dir, rank), exist_ok=True)
                atomic_write_json(path, data)
        return _merge_and_show(merge_dir, out_dir, quiet)
    if not _all_records_here(out_dir, info) or not _claim_merge(out_dir, info):
        return None
    return _merge_and_show(merge_dir, out_dir, quiet)


def _merge_and_show(merge_dir: Callable[[str], MergedReport], out_dir: str, quiet: bool) -> MergedReport:
    from supplyline.render.distributed import render_merged

    report = merge_dir(out_dir)
    if not quiet:
        render_merged(report, out_dir)
    return report


def _gather(record: RunRecord, info: RankInfo) -> list[Any] | None:
    """Every rank's record on rank 0, over the job's own process group; None when that is not possible."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() != info.world_size:
            return None
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=GATHER_TIMEOUT_S))
        out: list[Any] | None = [None] * info.world_size if info.rank == 0 else None
        dist.gather_object(record.to_dict(), out, dst=0, group=group)
        dist.destroy_process_group(group)
        return out if out is not None else []
    except Exception as exc:  # a broken group: the files are on disk, the merge happens without it
        print(
            f"supplyline doctor: rank {info.rank}: records not gathered through torch.distributed "
            f"({type(exc).__name__}); merging from the files instead",
            file=sys.stderr,
        )
        return None


def _same_job_on_disk(path: str, job_key: str) -> bool:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            return (json.load(fh).get("distributed") or {}).get("job_key") == job_key
    except (OSError, ValueError):
        return False


def _all_records_here(out_dir: str, info: RankInfo) -> bool:
    """Every rank of this job has written its record here, or has died on this machine without one."""
    return all(
        _same_job_on_disk(os.path.join(rank_dir(out_dir, r), "record.json"), info.job_key)
        or _died_here(out_dir, r, info)
        for r in range(info.world_size)
    )


def _died_here(out_dir: str, rank: int, info: RankInfo) -> bool:
    """Rank ``rank`` of this job started on this machine and its process is gone, with no record."""
    import json

    try:
        with open(os.path.join(rank_dir(out_dir, rank), STARTED_FILE), encoding="utf-8") as fh:
            started = json.load(fh)
        if started.get("job_key") != info.job_key or started.get("hostname") != info.hostname:
            return False
        return not _alive(int(started["pid"]), float(started["create_time"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _alive(pid: int, create_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        return bool(abs(p.create_time() - create_time) < 1.0 and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # cannot tell: treat as alive, so nobody merges without it
        return True


def _claim_merge(out_dir: str, info: RankInfo) -> bool:
    """Exactly one rank merges: the one that creates the job's lock file first."""
    digest = hashlib.sha1(info.job_key.encode()).hexdigest()[:12]
    try:
        fd = os.open(os.path.join(out_dir, f".merged-{digest}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False
    os.close(fd)
    return True

"""A torchrun job's output folder: the ranks' records in ``DIR/rank-K/``, merged into ``DIR/report.json``.

The merge itself is ``analyze.distributed.merge_records`` (pure); this room finds the records of the
newest launch, reads the started markers of ranks that left none, and writes the merged report
(to a temporary name, then renamed). The fixes are written with the same snippets as each rank's
own report, so the merged top fix reads as the rank's own.
"""

from __future__ import annotations

import glob
import json
import os
import re

from supplyline.analyze.distributed import MergedReport, StartedMarker, job_key, merge_records
from supplyline.atomic import atomic_write_json
from supplyline.errors import UserError
from supplyline.record import RunRecord, load_record

_RANK_DIR = re.compile(r"rank-(\d+)$")
# Written by each rank before its script runs (doctor/ranks.py): a rank with this file and no record
# started and was killed outright (SIGKILL, the OOM killer) or died in native code.
STARTED_FILE = "started.json"


def is_distributed_dir(directory: str) -> bool:
    return bool(glob.glob(os.path.join(directory, "rank-*", "record.json")))


def load_rank_records(directory: str) -> tuple[dict[int, RunRecord], list[str]]:
    """The newest job's records in DIR/rank-K/, by rank; notes about folders left out."""
    found: dict[int, RunRecord] = {}
    notes: list[str] = []
    for path in sorted(glob.glob(os.path.join(directory, "rank-*", "record.json"))):
        m = _RANK_DIR.search(os.path.dirname(path))
        if not m:
            continue
        try:
            found[int(m.group(1))] = load_record(path)
        except UserError as exc:
            notes.append(f"rank {m.group(1)}: record not read ({exc})")
    if not found and notes:
        raise UserError(f"no readable rank record in {directory}: " + "; ".join(notes))
    if not found:
        raise UserError(
            f"no rank records in {directory} (expected {directory}/rank-K/record.json from "
            f"`torchrun ... -m supplyline doctor`)"
        )
    jobs: dict[str, list[int]] = {}
    for rank, rec in found.items():
        jobs.setdefault(job_key(rec), []).append(rank)
    newest = max(jobs, key=lambda k: max(found[r].created_unix_s for r in jobs[k]))
    for key, ranks in jobs.items():
        if key != newest:
            notes.append(f"left out rank folders {sorted(ranks)}: they belong to an older launch")
    return {r: found[r] for r in sorted(jobs[newest])}, notes


def started_markers(directory: str, key: str) -> dict[int, StartedMarker]:
    """The ranks of this job that left a started marker in DIR/rank-K/ and no record: killed before writing it."""
    out: dict[int, StartedMarker] = {}
    for path in glob.glob(os.path.join(directory, "rank-*", STARTED_FILE)):
        m = _RANK_DIR.search(os.path.dirname(path))
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        written = os.path.exists(os.path.join(os.path.dirname(path), "record.json"))  # unreadable is not killed
        if m and not written and isinstance(data, dict) and data.get("job_key") == key:
            pid, host = data.get("pid"), data.get("hostname")
            out[int(m.group(1))] = StartedMarker(
                pid if isinstance(pid, int) else None, host if isinstance(host, str) else None
            )
    return out


def merge_dir(directory: str) -> MergedReport:
    """Merge DIR/rank-*/record.json into DIR/report.json; returns the merged report."""
    from supplyline.fixes import snippets  # as the doctor writes each rank's report (doctor/output.py)

    records, notes = load_rank_records(directory)
    first = next(iter(records.values()))
    report = merge_records(records, started_markers(directory, job_key(first)), snippets)
    report.notes = notes + report.notes
    atomic_write_json(os.path.join(directory, "report.json"), report.to_dict())
    return report

"""The renderer registry: every file a report can be written as, made from the typed Report.

``supplyline doctor`` writes them all after a run; ``supplyline report DIR --html/--json/--trace``
writes the ones asked for from a saved record. Each renderer takes the Report (and the record
only for raw series such as monitor samples) and never recomputes the analysis.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from supplyline.atomic import atomic_write_text
from supplyline.errors import UserError

if TYPE_CHECKING:
    from supplyline.analyze.report import Report
    from supplyline.record import RunRecord


@dataclass(frozen=True)
class FileRenderer:
    kind: str  # the name on the command line: --json, --trace, --html
    filename: str
    build: Callable[[Report, RunRecord], str]


def _json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


def _report_json(report: Report, record: RunRecord) -> str:
    return _json_text(report.to_dict())


def _trace_json(report: Report, record: RunRecord) -> str:
    from supplyline.render.trace import build_trace

    return _json_text(build_trace(record, report.breakdown, report.gpu_idle))


def _html(report: Report, record: RunRecord) -> str:
    from supplyline.render.html import build_html

    return build_html(report, record)


RENDERERS: dict[str, FileRenderer] = {
    r.kind: r
    for r in (
        FileRenderer("json", "report.json", _report_json),
        FileRenderer("trace", "trace.json", _trace_json),
        FileRenderer("html", "report.html", _html),
    )
}


@dataclass
class Written:
    paths: list[str]
    failures: list[str]  # "report.html: No space left on device"


def write_files(report: Report, record: RunRecord, out_dir: str, kinds: Iterable[str] = tuple(RENDERERS)) -> Written:
    """Write each chosen file atomically. One that cannot be written (a full disk, no permission)
    does not stop the others: its name and the reason are returned for one line to the user."""
    done = Written([], [])
    for kind in kinds:
        renderer = RENDERERS[kind]
        path = os.path.join(out_dir, renderer.filename)
        try:
            atomic_write_text(path, renderer.build(report, record))
        except (OSError, UserError) as exc:  # atomic writes say UserError("cannot write PATH: ...") from OSError
            done.failures.append(f"{renderer.filename}: {write_failure(exc)}")
            continue
        done.paths.append(path)
    return done


def write_failure(exc: BaseException) -> str:
    """The reason a file could not be written, without the path the caller already names."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if isinstance(cause, OSError):
        return str(cause.strerror or cause)
    return str(exc)

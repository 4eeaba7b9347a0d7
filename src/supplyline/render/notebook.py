"""The report inside a notebook: the report.html page in a frame of its own, and a few lines of text.

Why a frame: report.html is a whole page, with a stylesheet, a Content-Security-Policy and a
script. Pasted into a notebook's output as it is, its ``<style>`` would restyle the notebook
around it, and its policy (a ``<meta>`` outside the page's head) would be ignored while its
script ran in the notebook's own context. In an ``<iframe srcdoc>`` the very same page is a page
of its own, sandboxed with scripts allowed but no same-origin access, and its plots still draw.
"""

from __future__ import annotations

import html
import os
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from supplyline.render.html import build_html

if TYPE_CHECKING:
    from supplyline.analyze.report import Report
    from supplyline.record import RunRecord

FRAME_HEIGHT_PX = 760  # about the verdict, the phase table and the first plots; the page scrolls inside
TEXT_WIDTH = 100


def report_frame(report: Report, record: RunRecord) -> str:
    """The same page as report.html, escaped into an iframe's ``srcdoc``."""
    page = build_html(report, record)
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" sandbox="allow-scripts" '
        f'title="supplyline report" style="width:100%;height:{FRAME_HEIGHT_PX}px;border:1px solid #ccc">'
        "</iframe>"
    )


def report_text(report: Report, out_dir: str | None) -> str:
    """The verdict, the top finding's fix and where the files are: what a text-only front end shows."""
    v = report.verdict
    # A limit ends the block early: say so first, the rest of the cell did not run.
    stopped = f" ({report.outcome.stop_message})" if report.outcome.stop_message else ""
    lines = [f"supplyline{stopped}: {v.bound.upper()} — {v.sentence}"]
    if report.findings:
        top = report.findings[0]
        lines.append(f"fix ({top.check}): {first_fix(top.fix)}")
    else:
        lines.append(report.no_findings_sentence)
    if out_dir:
        lines.append(f"report: {os.path.join(out_dir, 'report.html')} (record.json, report.json, trace.json beside it)")
    return "\n".join(textwrap.fill(line, TEXT_WIDTH, subsequent_indent="  ") for line in lines)


def first_fix(fix: str) -> str:
    """The first of a finding's numbered fixes: ``(1) Load batches in parallel: ...; (2) ...`` -> the (1)."""
    head = fix.split(" (2) ", 1)[0].strip()
    return head[4:].strip() if head.startswith("(1) ") else head


def in_kernel() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel), where a report is displayed
    under the cell rather than printed as the terminal summary. IPython is not imported here: a
    process that has not loaded it is no kernel."""
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    try:
        shell = get_ipython() if get_ipython is not None else None
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_inline(obj: Any) -> None:
    """Display ``obj`` under the running cell (its ``_repr_html_`` and text repr)."""
    from IPython.display import display

    display(obj)  # type: ignore[no-untyped-call]  # IPython's display() carries no annotations

"""Where every command prints, set up once: its report on stdout, progress bars on stderr.

A terminal gets its own width. A pipe or a file gets ``PIPE_WIDTH`` columns, because rich would
otherwise guess 80 and fold tables and sentences that a log or ``grep`` reads better whole.
Progress bars draw on stderr and only on a terminal: in a pipe or a log the redraws are noise, and
stdout stays the report alone.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

PIPE_WIDTH = 160


def stdout_console() -> Console:
    """The report's console; markup only where the renderer asks for it (no guessed highlighting)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def progress_bar(*columns: str | ProgressColumn) -> Progress:
    """A transient bar on stderr, drawn only on a terminal. Without columns: what is being done,
    the bar, done/total, the time so far and how long is left."""
    console = stderr_console()
    return Progress(
        *(
            columns
            or (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
            )
        ),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )

"""A panel kept at the bottom of the terminal while other output scrolls above it.

Why not rich's ``Live``: its stdout/stderr proxies re-render the whole panel through rich on every
line the job prints (about 0.4 ms a line measured here, ~30% of a 9 ms step for a job that prints
each step), and that cost lands on the training thread. Here rich renders the panel to a string on
the refresh thread; a printed line costs the training thread an erase, the line and a redraw of
that cached string: plain writes.

Output rules: only complete lines pass (a partial line waits for its newline, or for ``flush``),
so a line is never cut by the panel; stdout's lines still go to stdout and stderr's to stderr.
"""

from __future__ import annotations

import io
import shutil
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console, RenderableType

ERASE_LINE = "\r\x1b[2K"
UP = "\x1b[1A"


class TerminalPanel:
    def __init__(self, render: Callable[[], RenderableType], stream: TextIO, refresh_s: float = 0.5) -> None:
        self.render = render
        self.stream = stream  # the terminal (stderr)
        self.refresh_s = refresh_s
        self.lock = threading.RLock()
        self.drawn = ""  # the panel as last drawn (ANSI text, no final newline)
        self.height = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restore: list[tuple[str, TextIO]] = []

    # -- drawing (callers hold the lock) -------------------------------------------------------
    def _erase(self) -> None:
        if self.height:
            self.stream.write(ERASE_LINE + (UP + ERASE_LINE) * (self.height - 1))

    def _draw(self) -> None:
        if self.drawn:
            self.stream.write(self.drawn)
        self.stream.flush()

    def pass_through(self, target: TextIO, text: str) -> None:
        """Write complete lines above the panel."""
        with self.lock:
            self._erase()
            self.stream.flush()
            target.write(text)
            target.flush()
            self._draw()

    def refresh(self) -> None:
        width = shutil.get_terminal_size((80, 24)).columns
        buf = io.StringIO()
        # Lines cropped to the width: a wrapped panel line would throw off the erase count.
        Console(file=buf, force_terminal=True, width=width, color_system="standard", highlight=False).print(
            self.render(), no_wrap=True, overflow="ellipsis", crop=True
        )
        text = buf.getvalue().rstrip("\n")
        with self.lock:
            self._erase()
            self.drawn, self.height = text, text.count("\n") + 1
            self._draw()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, redirect_stdout: bool) -> None:
        names = ["stderr"] + (["stdout"] if redirect_stdout else [])
        for name in names:
            original = getattr(sys, name)
            self._restore.append((name, original))
            setattr(sys, name, LineProxy(self, original))
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="supplyline-live", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.refresh()
            except Exception:  # a display hiccup must never reach the job
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self.lock:
            for name, original in reversed(self._restore):
                proxy = getattr(sys, name)
                setattr(sys, name, original)
                if isinstance(proxy, LineProxy):
                    proxy.release()
            self._restore.clear()
            self._erase()  # transient: the summary follows where the panel was
            self.drawn, self.height = "", 0
            self.stream.flush()


class LineProxy(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr: buffers until a newline, then writes above the panel."""

    def __init__(self, panel: TerminalPanel, target: TextIO) -> None:
        super().__init__()
        self._panel = panel
        self._target = target
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        cut = self._pending.rfind("\n")
        if cut >= 0:
            done, self._pending = self._pending[: cut + 1], self._pending[cut + 1 :]
            self._panel.pass_through(self._target, done)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            done, self._pending = self._pending + "\n", ""
            self._panel.pass_through(self._target, done)

    def release(self) -> None:
        """On stop: a partial line goes out as it is, without the panel."""
        if self._pending:
            self._target.write(self._pending)
            self._pending = ""
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIO's is an attribute; the target's, read live
        return getattr(self._target, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:  # buffer, errors, name, ...: the real stream's
        return getattr(self._target, name)

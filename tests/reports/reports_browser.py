"""Headless Debian chromium for the report tests: load a page from disk, return its DOM after the
scripts ran and every console message it logged. No DevTools client needed: ``--dump-dom``
serializes the live DOM, and ``--enable-logging=stderr`` prints each console message as a
``CONSOLE`` line (an uncaught error or a CSP violation included)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)\] (.*)")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    figure: str | None  # data-plot of the enclosing <figure>, if any
    text: list[str] = field(default_factory=list)


class DomIndex(HTMLParser):
    """Every element of a serialized DOM, with the plot figure it sits in and its own text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.nodes: list[Node] = []
        self._stack: list[Node] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        fig = a.get("data-plot") if tag == "figure" else (self._stack[-1].figure if self._stack else None)
        node = Node(tag, a, fig)
        self.nodes.append(node)
        if tag not in VOID:
            self._stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for k in range(len(self._stack) - 1, -1, -1):
            if self._stack[k].tag == tag:
                del self._stack[k:]
                return

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1].text.append(data)

    def find(self, tag: str | None = None, figure: str | None = None, **attrs: str) -> list[Node]:
        return [
            n
            for n in self.nodes
            if (tag is None or n.tag == tag)
            and (figure is None or n.figure == figure)
            and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def by_id(self, ident: str) -> Node | None:
        return next((n for n in self.nodes if n.attrs.get("id") == ident), None)


@dataclass
class Loaded:
    dom: DomIndex
    html: str
    console: list[str]


def load(path: str, timeout: float = 120) -> Loaded:
    """Open ``path`` in headless chromium; the timeout guards against a hung browser only."""
    exe = chromium()
    assert exe is not None
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                f"file://{path}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [m.group(1) for m in CONSOLE.finditer(proc.stderr)]
    return Loaded(DomIndex(proc.stdout), proc.stdout, console)

"""Line-level hot spots: a thread samples the worker thread's frame via ``sys._current_frames()``.

A sampler (rather than a tracing line profiler) keeps the cost low and needs no extra package. The
source of each hot line is then parsed to tell whether it runs inside a Python loop, which is what
the "vectorize this" suggestion rests on.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from supplyline.preprocess.report import HotLine, LineReport, Location

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LineKey = tuple[str, int, str, int]  # file, line, function, function's first line


class LineSampler:
    """Counts where one thread is, every ``interval_s``, until stopped."""

    def __init__(self, thread_id: int, interval_s: float = 0.001) -> None:
        self.thread_id = thread_id
        self.interval_s = interval_s
        self.counts: Counter[LineKey] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="supplyline-line-sampler", daemon=True)
        self._old_switch = sys.getswitchinterval()

    def __enter__(self) -> LineSampler:
        # A short switch interval lets the sampler take the GIL from a busy thread on time; with the
        # default 5 ms it would mostly get the GIL when the thread releases it (I/O, decoders), which
        # would bias the samples towards those lines.
        sys.setswitchinterval(min(self._old_switch, self.interval_s / 20))
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._old_switch)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            frame = sys._current_frames().get(self.thread_id)
            # supplyline's own frame innermost means the thread is between samples (or in a stage
            # proxy calling a C function): nothing of the user's to attribute, so not counted.
            if frame is None or frame.f_code.co_filename.startswith(_OWN_DIR):
                continue
            code = frame.f_code
            self.counts[
                (code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name), code.co_firstlineno)
            ] += 1
            self.samples += 1


def sample_lines(
    call: Callable[[int], Any], indices: list[int], min_seconds: float, interval_s: float = 0.001, max_rounds: int = 50
) -> LineSampler:
    """Call ``call(i)`` over the indices (repeating them until ``min_seconds``) under the sampler."""
    sampler = LineSampler(threading.get_ident(), interval_s)
    start = time.perf_counter()
    with sampler:
        for _ in range(max_rounds):
            for index in indices:
                try:
                    call(index)
                except Exception:
                    pass  # the timing pass already reported it
            if time.perf_counter() - start >= min_seconds:
                break
    return sampler


@functools.lru_cache(maxsize=64)
def _parse(filename: str) -> ast.Module | None:
    try:
        with open(filename, encoding="utf-8") as fh:
            return ast.parse(fh.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return None


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def enclosing_loop(filename: str, line: int) -> int | None:
    """Line of the outermost for/while/comprehension around ``line`` within its own function.

    Outermost, because that is the loop a vectorized rewrite replaces (all of a per-pixel y/x nest).
    """
    tree = _parse(filename)
    if tree is None:
        return None
    best: ast.stmt | ast.expr | None = None
    for node in ast.walk(tree):
        if isinstance(node, _LOOPS) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if not _crosses_function(tree, node, line) and (best is None or node.lineno < best.lineno):
                best = node
    return best.lineno if best is not None else None


def _crosses_function(tree: ast.Module, loop: ast.AST, line: int) -> bool:
    """True when a def nested inside the loop holds the line (the loop is not the line's own)."""
    for node in ast.walk(loop):
        if node is not loop and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                return True
    return False


def build_report(sampler: LineSampler, self_share: Callable[[str, int], float | None], top: int = 10) -> LineReport:
    """Rank lines by share of samples; mark those inside a Python loop of the same function."""
    total = max(sampler.samples, 1)
    lines = []
    for (filename, line, function, first_line), count in sampler.counts.most_common(top):
        loop_line = enclosing_loop(filename, line)
        lines.append(
            HotLine(
                location=Location(file=filename, line=line, function=function),
                share=count / total,
                source=linecache.getline(filename, line).strip(),
                in_python_loop=loop_line is not None,
                loop_line=loop_line,
                function_self_share=self_share(filename, first_line),
            )
        )
    return LineReport(samples=sampler.samples, interval_ms=sampler.interval_s * 1e3, lines=lines)

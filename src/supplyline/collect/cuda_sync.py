"""Counts host-device synchronizations and the user lines that cause them (a `loss.item()` per step).

CUDA only. PyTorch's sync debug mode ("warn") raises a UserWarning at every synchronizing call;
we route those warnings here instead of printing them, and attribute each to the innermost frame
of the user's code. ``SyncCounter.observe`` is the seam: tests drive it on CPU with a fake warning.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from supplyline.collect.events import GpuInfo, SyncLine

_MARK = "synchronizing CUDA operation"


class SyncCounter:
    def __init__(self, is_user_file: Callable[[str], bool]) -> None:
        self.is_user_file = is_user_file
        self.by_line: Counter[tuple[str, int, str]] = Counter()
        self.total = 0
        self._original_show: Any = None
        self._previous_mode: Any = None

    def install(self) -> bool:
        import torch

        if not torch.cuda.is_available():
            return False
        self._previous_mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        warnings.filterwarnings("always", message=f".*{_MARK}.*")
        self._original_show = warnings.showwarning
        warnings.showwarning = self._show
        return True

    def uninstall(self) -> None:
        if self._original_show is None:
            return
        import torch

        warnings.showwarning = self._original_show
        torch.cuda.set_sync_debug_mode(self._previous_mode)
        self._original_show = None

    def _show(
        self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        if _MARK in str(message):
            self.observe(sys._getframe(1))
            return
        self._original_show(message, category, filename, lineno, file, line)

    def observe(self, frame: FrameType | None) -> None:
        """Count one synchronization, attributed to the innermost user frame above ``frame``."""
        self.total += 1
        while frame is not None and not self.is_user_file(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is not None:
            self.by_line[(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)] += 1

    def info(self, available: bool) -> GpuInfo:
        lines = [SyncLine(f, line, fn, c) for (f, line, fn), c in self.by_line.most_common(10)]
        return GpuInfo(available=available, syncs=self.total, sync_lines=lines)

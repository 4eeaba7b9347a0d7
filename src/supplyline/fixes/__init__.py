"""What users import to apply supplyline's fixes in their own training script.

- ``async_logging()``: log handlers run on a listener thread; the training thread only enqueues.
- ``async_stdout()``: ``print`` and other stdout/stderr writes, queued and written by a background thread.
- ``AsyncCheckpointer``: checkpoints copied to CPU memory on the call and written in the
  background, atomically, pruned; ``load_latest`` reads them back.
- ``every()``: "log every N steps" with an on-device running mean (no per-step host sync).

See docs/fixes.md for the two-line change each one needs and what it guarantees.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use (PEP 562), so `from supplyline.fixes import async_logging` does not
# pay for importing torch.
_HOMES = {
    "AsyncLogging": "logging_queue",
    "async_logging": "logging_queue",
    "AsyncStdout": "stdout_queue",
    "async_stdout": "stdout_queue",
    "AsyncCheckpointer": "checkpoint",
    "load_latest": "checkpoint",
    "Checkpoint": "_ckpt_files",
    "Every": "periodic",
    "every": "periodic",
}

if TYPE_CHECKING:
    from supplyline.fixes._ckpt_files import Checkpoint
    from supplyline.fixes.checkpoint import AsyncCheckpointer, load_latest
    from supplyline.fixes.logging_queue import AsyncLogging, async_logging
    from supplyline.fixes.periodic import Every, every
    from supplyline.fixes.stdout_queue import AsyncStdout, async_stdout

# Spelled out (not sorted(_HOMES)) so linters and type checkers see the public names.
__all__ = [
    "AsyncCheckpointer",
    "AsyncLogging",
    "AsyncStdout",
    "Checkpoint",
    "Every",
    "async_logging",
    "async_stdout",
    "every",
    "load_latest",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'supplyline.fixes' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"supplyline.fixes.{_HOMES[name]}"), name)
    globals()[name] = value
    return value

"""What users import to apply supplyline's fixes in their own training script.

- ``async_logging()``: log handlers run on a listener thread; the training thread only enqueues.
- ``AsyncCheckpointer``: checkpoints copied to CPU memory on the call and written in the
  background, atomically, pruned; ``load_latest`` reads them back.
- ``every()``: "log every N steps" with an on-device running mean (no per-step host sync).

See docs/fixes.md for the two-line change each one needs and what it guarantees.
"""
from __future__ import annotations

from supplyline.fixes.async_logging import AsyncLogging, async_logging
from supplyline.fixes.checkpoint import AsyncCheckpointer, load_latest
from supplyline.fixes._ckpt_files import Checkpoint
from supplyline.fixes.every import Every, every

__all__ = ["AsyncCheckpointer", "AsyncLogging", "Checkpoint", "Every", "async_logging", "every", "load_latest"]

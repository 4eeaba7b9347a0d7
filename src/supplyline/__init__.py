"""supplyline: find and remove the CPU and disk bottlenecks that starve model training.

The monitor imports without torch; training-side features import torch lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from supplyline.collect.sampler import Monitor as Monitor

__all__ = ["Monitor", "__version__", "load_ipython_extension", "watch"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext supplyline``: registers the ``%%supplyline`` cell magic (docs/notebook.md)."""
    from supplyline.notebook import register

    register(ipython)


def __getattr__(name: str) -> Any:
    # Lazy so that `import supplyline` stays cheap and never drags torch in for the monitor.
    if name == "Monitor":
        from supplyline.collect.sampler import Monitor

        return Monitor
    if name == "watch":
        from supplyline.doctor.watch import watch

        return watch
    raise AttributeError(f"module 'supplyline' has no attribute {name!r}")

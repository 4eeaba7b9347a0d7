"""Jupyter: ``%load_ext supplyline`` and the ``%%supplyline`` cell magic (docs/notebook.md).

IPython is imported only here, and only when a kernel loads the extension: ``import supplyline``
needs neither IPython nor torch.
"""

from __future__ import annotations

from supplyline.notebook.magic import register

__all__ = ["register"]

"""The exact ``supplyline tune`` command for a live dataset object (naming the dataset itself is
``supplyline.locate``'s job, shared with the doctor)."""

from __future__ import annotations

import shlex
from typing import Any

from supplyline.locate import dataset_spec_for, importable_names

# The script scan under the name this module has always exported.
_importable_names = importable_names


def tune_command_for(dataset_obj: Any, batch_size: int | None = None) -> str | None:
    """The exact ``supplyline tune MODULE:ATTR`` command for ``dataset_obj``, or None."""
    spec = dataset_spec_for(dataset_obj)
    if spec is None:
        return None
    command = f"supplyline tune {shlex.quote(spec)}"
    return command + (f" --batch-size {batch_size}" if batch_size else "")

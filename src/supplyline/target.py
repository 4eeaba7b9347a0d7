"""Resolve a user's ``MODULE:ATTR`` (or ``path/to/file.py:ATTR``) into an object, with one-line errors."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from supplyline.errors import UserError


def load_attr(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (dotted attributes allowed) and return the attribute.

    The current directory is put on ``sys.path`` first, as ``python -m`` would, so a user's
    ``data.py`` next to them imports. A ``.py`` path before the colon is loaded as a file.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise UserError(f"'{spec}' is not MODULE:ATTR (for example mydata:train_dataset)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if module_name.endswith(".py"):
            module = _load_file(module_name)
        else:
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except ModuleNotFoundError as exc:
        raise UserError(f"cannot import '{module_name}': {exc}") from exc
    except Exception as exc:  # the user's module raised while importing
        raise UserError(f"importing '{module_name}' failed: {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise UserError(f"'{module_name}' has no attribute '{attr_path}'")
        obj = getattr(obj, part)
    return obj


def _load_file(path: str) -> Any:
    if not os.path.isfile(path):
        raise UserError(f"no such file: {path}")
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise UserError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so classes defined there stay picklable for DataLoader workers.
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module

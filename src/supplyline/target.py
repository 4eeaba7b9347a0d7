"""A user's ``MODULE:ATTR`` (or ``path/to/file.py:ATTR``): import it, and unwrap the dataset it names.

Every tool that takes a dataset from the command line goes through here, so they accept the same
things and fail with the same one-line errors.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
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
    except SystemExit as exc:  # a script's top-level code ran: it needs an `if __name__ == "__main__":` guard
        raise UserError(
            f"importing '{module_name}' called sys.exit({exc.code}); put the script's top-level code "
            'under `if __name__ == "__main__":` so that the dataset can be imported'
        ) from None
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


@dataclass(frozen=True)
class UserDataset:
    """What a user's target named, unwrapped: the dataset, the DataLoader it came in (when they
    pointed at one, so a tool can keep its settings), and its length."""

    dataset: Any
    loader: Any | None
    length: int | None  # None: an IterableDataset without len()


def resolve_dataset(obj: Any, name: str, *, not_a_dataset: str, iterable_ok: bool = True) -> UserDataset:
    """Unwrap a Dataset, a DataLoader, or a no-argument callable (class or function) returning either.

    Both ``tune`` and ``preprocess`` take their target through here, so they accept the same
    things and fail the same way, in one line. ``not_a_dataset`` finishes the sentence for anything
    else (``NAME is a int, not ...``) in the tool's own words; ``iterable_ok=False`` refuses an
    IterableDataset, for a tool that has to index items.
    """
    from torch.utils.data import DataLoader, IterableDataset

    if callable(obj) and not is_dataset(obj) and not isinstance(obj, DataLoader):
        try:
            obj = obj()
        except Exception as exc:
            raise UserError(f"calling {name} with no arguments failed: {type(exc).__name__}: {exc}") from exc
    loader = obj if isinstance(obj, DataLoader) else None
    dataset = obj if loader is None else loader.dataset
    iterable = isinstance(dataset, IterableDataset)
    if iterable and not iterable_ok:
        raise UserError(
            f"{name} is an IterableDataset ({type(dataset).__name__}); this needs a map-style dataset "
            "with __getitem__ and __len__"
        )
    if not is_dataset(dataset):
        raise UserError(f"{name} is a {type(dataset).__name__}, not {not_a_dataset}")
    length = _length(dataset, name, iterable)
    if length == 0:
        raise UserError(f"{name} is empty (len() is 0): there is nothing to load")
    return UserDataset(dataset, loader, length)


def is_dataset(obj: Any) -> bool:
    """A dataset instance: an IterableDataset, or anything with ``__getitem__`` and ``__len__``
    (duck-typed, as the DataLoader itself accepts). A class is not one: it is called first."""
    if isinstance(obj, type):
        return False
    from torch.utils.data import IterableDataset

    return isinstance(obj, IterableDataset) or (hasattr(obj, "__getitem__") and hasattr(obj, "__len__"))


def _length(dataset: Any, name: str, iterable: bool) -> int | None:
    try:
        return len(dataset)
    except Exception as exc:
        if iterable and isinstance(exc, TypeError):  # an IterableDataset need not know its length
            return None
        raise UserError(f"len() of {name} failed: {type(exc).__name__}: {exc}") from exc

"""Find an importable ``MODULE:ATTR`` for a live dataset object: the other direction of
``supplyline.target``. The doctor names the training dataset this way, so its findings can print
the exact ``supplyline tune`` / ``supplyline preprocess`` command to run next."""

from __future__ import annotations

import ast
import inspect
import os
import sys
import typing
from types import ModuleType
from typing import Any

# Modules that never hold the user's dataset: skipping them keeps the scan short and avoids
# pointing at library internals.
_SKIP = (
    "supplyline",
    "torch",
    "torchvision",
    "numpy",
    "PIL",
    "rich",
    "psutil",
    "importlib",
    "multiprocessing",
    "concurrent",
    "encodings",
    "collections",
    "typing",
    "builtins",
    "sys",
)


def dataset_spec_for(dataset_obj: Any) -> str | None:
    """An importable ``MODULE:ATTR`` (or ``script.py:ATTR``) that gives ``dataset_obj``, or None.

    Preference: a module attribute that *is* the object; else its class, when that class takes no
    parameters at all (so every instance is made the same way); else a function with no
    parameters annotated to return that class. A script run as
    ``__main__`` is named by its path, and only when importing it is safe (an
    ``if __name__ == "__main__"`` guard) and the attribute is defined outside that guard.
    """
    found: list[tuple[int, int, str]] = []
    for module_name, module in list(sys.modules.items()):
        private = module_name.startswith("_") and module_name != "__main__"
        if not isinstance(module, ModuleType) or module_name.split(".")[0] in _SKIP or private:
            continue
        try:
            attrs = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in attrs:
            if attr.startswith("__"):
                continue
            rank = _rank(dataset_obj, value, module_name)
            if rank is None:
                continue
            spec = _spec(module_name, module, attr)
            if spec:
                found.append((rank, module_name == "__main__", spec))
    if not found:
        return None
    return min(found)[2]


def _rank(obj: Any, value: Any, module_name: str) -> int | None:
    try:
        if value is obj:
            return 0
        cls = type(obj)
        if cls.__module__ == "builtins" or not _dataset_like(obj):
            return None
        if isinstance(value, type) and cls is value and _takes_no_parameters(value):
            return 1
        if (
            inspect.isfunction(value)
            and value.__module__ == module_name
            and _takes_no_parameters(value)
            and _returns(value, cls)
        ):
            return 2
    except Exception:  # odd objects (proxies, lazy modules) must not break the scan
        return None
    return None


def _dataset_like(obj: Any) -> bool:
    return (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")) or hasattr(obj, "__iter__")


def _takes_no_parameters(fn: Any) -> bool:
    """No parameters at all, not merely none required: defaults could differ from how the live
    object was made (``Images(root="/data")`` is not ``Images()``)."""
    try:
        return not inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _returns(fn: Any, cls: type) -> bool:
    try:
        return typing.get_type_hints(fn).get("return") is cls
    except Exception:
        return False


def _spec(module_name: str, module: ModuleType, attr: str) -> str | None:
    if module_name != "__main__":
        return f"{module_name}:{attr}"
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return None
    if attr not in importable_names(path):
        return None
    rel = os.path.relpath(path)
    return f"{rel if not rel.startswith('..') else path}:{attr}"


def importable_names(path: str) -> set[str]:
    """Names a script defines at top level, outside ``if __name__ == "__main__"``; empty when the
    script has no such guard (importing it would start the training)."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    guarded = False
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
            guarded = True
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names if guarded else set()

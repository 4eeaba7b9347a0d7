"""Find an importable ``MODULE:ATTR`` for a live dataset object, so a finding can print the exact
``supplyline tune`` command (the doctor's dataloader finding uses this)."""
from __future__ import annotations

import ast
import inspect
import os
import shlex
import sys
import typing
from types import ModuleType
from typing import Any

# Modules that never hold the user's dataset: skipping them keeps the scan short and avoids
# pointing at library internals.
_SKIP = ("supplyline", "torch", "torchvision", "numpy", "PIL", "rich", "psutil", "importlib",
         "multiprocessing", "concurrent", "encodings", "collections", "typing", "builtins", "sys")


def tune_command_for(dataset_obj: Any, batch_size: int | None = None) -> str | None:
    """The exact ``supplyline tune MODULE:ATTR`` command for ``dataset_obj``, or None.

    Preference: a module attribute that *is* the object; else a class that made it and takes no
    arguments; else a no-argument function annotated to return its class. A script run as
    ``__main__`` is named by its path, and only when importing it is safe (an
    ``if __name__ == "__main__"`` guard) and the attribute is defined outside that guard.
    """
    found: list[tuple[int, int, str]] = []
    for module_name, module in list(sys.modules.items()):
        if not isinstance(module, ModuleType) or module_name.split(".")[0] in _SKIP or module_name.startswith("_"):
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
    spec = min(found)[2]
    command = f"supplyline tune {shlex.quote(spec)}"
    return command + (f" --batch-size {batch_size}" if batch_size else "")


def _rank(obj: Any, value: Any, module_name: str) -> int | None:
    try:
        if value is obj:
            return 0
        if isinstance(value, type) and type(obj) is value and _no_args_needed(value):
            return 1
        if (inspect.isfunction(value) and value.__module__ == module_name and _no_args_needed(value)
                and _returns(value, type(obj))):
            return 2
    except Exception:  # odd objects (proxies, lazy modules) must not break the scan
        return None
    return None


def _no_args_needed(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind()
    except (TypeError, ValueError):
        return False
    return True


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
    if attr not in _importable_names(path):
        return None
    rel = os.path.relpath(path)
    return f"{rel if not rel.startswith('..') else path}:{attr}"


def _importable_names(path: str) -> set[str]:
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

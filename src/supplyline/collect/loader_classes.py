"""DataLoader subclasses, those defined now and those the script defines later.

Loader libraries subclass ``DataLoader`` and override what the hooks sit on: torchdata's
``StatefulDataLoader`` defines its own ``__init__`` (never calling ``DataLoader.__init__``) and its
own ``__iter__`` (never calling ``DataLoader.__iter__``). A patch on ``DataLoader`` alone misses
both, so whoever patches the base also patches each subclass that overrides the same method.

The library is usually imported by the script after the hooks are installed, so the subclasses
that exist at install are walked once, and ``DataLoader.__init_subclass__`` reports the later ones
(a class statement runs it once; there is no per-step cost).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_callbacks: list[Callable[[type], None]] = []
_had_own: list[Any] = []  # DataLoader's own __init_subclass__ before ours, when it had one


def dataloader_subclasses() -> list[type]:
    """Every subclass of ``DataLoader`` defined so far, parents before children."""
    from torch.utils.data import DataLoader

    found: list[type] = []
    todo = list(DataLoader.__subclasses__())
    while todo:
        cls = todo.pop(0)
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return found


def overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` defines ``name`` itself (not inherited)."""
    return name in cls.__dict__


def takes_loader_settings(cls: type, names: tuple[str, ...] = ("num_workers",)) -> bool:
    """Whether ``cls.__init__`` is the subclass's own and takes every one of ``names`` (or ``**kwargs``):
    the loaders whose settings can be changed where they are made (StatefulDataLoader, litdata's
    StreamingDataLoader). A subclass whose ``__init__`` fixes them itself is left to ``DataLoader``'s."""
    if not overrides(cls, "__init__"):
        return False
    try:
        params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]  # read, not called
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return "num_workers" in params
    return all(name in params for name in names)


def watch_subclasses(callback: Callable[[type], None]) -> Callable[[], None]:
    """Call ``callback(cls)`` for every DataLoader subclass now and for each one defined later.

    Returns the undo. A failing callback is ignored: a class statement in the user's code must
    never fail because of us.
    """
    from torch.utils.data import DataLoader

    for cls in dataloader_subclasses():
        _safe(callback, cls)
    if not _callbacks:
        _install(DataLoader)
    _callbacks.append(callback)

    def undo() -> None:
        if callback in _callbacks:
            _callbacks.remove(callback)
        if not _callbacks:
            _uninstall(DataLoader)

    return undo


def _safe(callback: Callable[[type], None], cls: type) -> None:
    try:
        callback(cls)
    except Exception:
        pass


def _install(base: Any) -> None:
    own = base.__dict__.get("__init_subclass__")
    _had_own[:] = [own] if own is not None else []

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if own is not None:
            own.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        for callback in list(_callbacks):
            _safe(callback, cls)

    base.__init_subclass__ = classmethod(__init_subclass__)


def _uninstall(base: Any) -> None:
    if _had_own:
        base.__init_subclass__ = _had_own.pop()
    elif "__init_subclass__" in base.__dict__:
        del base.__init_subclass__

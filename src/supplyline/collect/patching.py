"""Reversible monkey-patching, shared by every set of hooks the doctor installs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Patcher:
    """Replaces attributes with wrappers and puts every original back on ``uninstall``."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        own = name in getattr(owner, "__dict__", {})
        original = owner.__dict__[name] if own else getattr(owner, name)
        wrapper = make(original)
        try:
            wrapper.__wrapped__ = original
            if getattr(wrapper, "__doc__", None) is None:
                wrapper.__doc__ = getattr(original, "__doc__", None)
        except (AttributeError, TypeError):  # a builtin or a bound method: leave it as it is
            pass
        setattr(owner, name, wrapper)
        # An inherited attribute (Tensor.to comes from the C base) is un-shadowed, not re-set.
        self._undo.append((lambda: setattr(owner, name, original)) if own else (lambda: delattr(owner, name)))

    def uninstall(self) -> None:
        while self._undo:
            try:
                self._undo.pop()()
            except Exception:  # restoring must never break the user's exit path
                pass

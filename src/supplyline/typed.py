"""Dataclasses to and from plain JSON values, checked against their type hints.

The record is saved as JSON and read back by ``report``, ``compare`` and ``merge``, sometimes
from files that were hand-edited, truncated or written by something else. Building the typed
objects field by field against the annotations is the one place that validates a loaded file:
a wrong shape becomes one line that names the field (``record field 'monitor.samples[3].cpu' …``)
instead of a KeyError deep in the analysis.

Supported annotations: dataclasses, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``,
``X | None``, ``Literal[...]``, ``int``, ``float``, ``str``, ``bool`` and ``Any``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import cache
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")


class ShapeError(ValueError):
    """A plain value does not fit the annotation; ``path`` names where."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def to_plain(obj: Any) -> Any:
    """Dataclasses (recursively) to dicts; lists and tuples to lists. Cheaper than ``asdict``.

    A field whose metadata says ``{"json": False}`` is left out, and so is one that says
    ``{"omit_none": True}`` while it holds None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            if f.metadata and not f.metadata.get("json", True):
                continue
            value = getattr(obj, f.name)
            if value is None and f.metadata and f.metadata.get("omit_none"):
                continue
            out[f.name] = to_plain(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


def from_plain(cls: type[T], data: Any, path: str = "") -> T:
    """Build ``cls`` from ``data``; raises ShapeError naming the first field that does not fit.

    Fields missing from ``data`` take their defaults (records written before the field existed);
    keys ``cls`` does not know are ignored (records written by a newer supplyline).
    """
    return _convert(cls, data, path)  # _convert is checked by construction


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, value: Any, path: str) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _union(tp, value, path)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ShapeError(path, f"expected one of {', '.join(map(repr, typing.get_args(tp)))}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ShapeError(path, f"expected a list, got {_kind(value)}")
        item = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        items = [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ShapeError(path, f"expected an object, got {_kind(value)}")
        _, item = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(item, v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, path)
    return _scalar(tp, value, path)


def _union(tp: Any, value: Any, path: str) -> Any:
    args = typing.get_args(tp)
    if value is None:
        if type(None) in args:
            return None
        raise ShapeError(path, "is null")
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _convert(arg, value, path)
        except ShapeError as exc:
            errors.append(exc)
    raise errors[0]


def _dataclass(cls: type, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise ShapeError(path, f"expected an object, got {_kind(value)}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        where = f"{path}.{f.name}" if path else f.name
        if f.name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ShapeError(where, "is missing")
            continue
        kwargs[f.name] = _convert(hints[f.name], value[f.name], where)
    return cls(**kwargs)


def _scalar(tp: Any, value: Any, path: str) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ShapeError(path, f"expected {getattr(tp, '__name__', tp)}, got {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}" if not (isinstance(value, float) and not math.isfinite(value)) else str(value)
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__

"""Find the transform chain on a dataset and time each stage inside the real ``__getitem__`` calls.

Stages are wrapped in place (the chain's own list entries are swapped for timing proxies and put
back afterwards), so each stage sees exactly the inputs the dataset gives it — no re-running the
chain on guessed inputs. The same proxies record the kind of data entering and leaving each stage,
which is how conversions between NumPy arrays, PIL images and tensors ("type churn") are counted.
"""

from __future__ import annotations

import copy
import functools
import inspect
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supplyline.errors import UserError
from supplyline.preprocess import schedclock
from supplyline.preprocess.report import Location

# Attribute names under which datasets commonly keep their preprocessing, most common first.
CANDIDATE_ATTRS = (
    "transform",
    "transforms",
    "augment",
    "augmentation",
    "augmentations",
    "pipeline",
    "preprocess",
    "tfms",
)
ARRAY_KINDS = {"numpy", "pil", "tensor"}


def kind_of(value: Any) -> str:
    """Name the kind of a sample value; containers are named by their first (image-like) item."""
    if isinstance(value, dict):
        value = value.get("image", next(iter(value.values()), None)) if value else None
    elif isinstance(value, (tuple, list)) and value:
        value = value[0]
    module = type(value).__module__ or ""
    name = type(value).__name__
    if module.startswith("numpy") and name == "ndarray":
        return "numpy"
    if module.startswith("PIL"):
        return "pil"
    if module.startswith("torch") and "Tensor" in name:
        return "tensor"
    return name


def locate(fn: Any) -> Location | None:
    """Where a stage's code lives: the function, or the class's ``forward``/``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    target: Any = fn
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        cls = type(fn)
        target = getattr(cls, "forward", None) if _is_torch_module(fn) else getattr(cls, "__call__", None)  # noqa: B004  # the method itself, not a callable test
    target = getattr(target, "__func__", target)
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    return Location(file=code.co_filename, line=code.co_firstlineno, function=code.co_qualname)


def _is_torch_module(obj: Any) -> bool:
    return any(c.__module__ == "torch.nn.modules.module" and c.__name__ == "Module" for c in type(obj).__mro__)


def stage_name(fn: Any) -> str:
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn.__qualname__
    text = repr(fn)
    if " object at 0x" in text or len(text) > 70:
        return type(fn).__name__
    return " ".join(text.split())


@dataclass
class StageRecorder:
    """Shared by the proxies: per-stage times and kinds for the sample being loaded."""

    stages: int
    checking: bool = False  # determinism mode: run each stage twice on a copy, do not time
    times_ms: list[list[float]] = field(default_factory=list)  # own time: wall minus waiting for a CPU
    wall_ms: list[list[float]] = field(default_factory=list)
    in_kinds: list[Counter[str]] = field(default_factory=list)
    out_kinds: list[Counter[str]] = field(default_factory=list)
    paths: Counter[tuple[str, ...]] = field(default_factory=Counter)
    same_twice: list[list[bool]] = field(default_factory=list)
    _pending: list[tuple[int, float, float, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.times_ms = [[] for _ in range(self.stages)]
        self.wall_ms = [[] for _ in range(self.stages)]
        self.in_kinds = [Counter() for _ in range(self.stages)]
        self.out_kinds = [Counter() for _ in range(self.stages)]
        self.same_twice = [[] for _ in range(self.stages)]

    def begin_sample(self) -> None:
        self._pending = []

    def commit_sample(self) -> None:
        """Keep what the stages recorded for a sample that loaded without error."""
        path: list[str] = []
        for position, own_ms, wall_ms, kind_in, kind_out in self._pending:
            self.times_ms[position].append(own_ms)
            self.wall_ms[position].append(wall_ms)
            self.in_kinds[position][kind_in] += 1
            self.out_kinds[position][kind_out] += 1
            if not path:
                path.append(kind_in)
            path.append(kind_out)
        if path:
            self.paths[tuple(path)] += 1
        self._pending = []


class TimedStage:
    """Calls the wrapped stage, timing it; every other attribute reads through to the stage."""

    def __init__(self, inner: Callable[..., Any], recorder: StageRecorder, position: int) -> None:
        self._inner = inner
        self._recorder = recorder
        self._position = position

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_recorder", "_position"):
            raise AttributeError(name)  # copy/pickle probe these before __init__ ran
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return repr(self._inner)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recorder = self._recorder
        data = args[0] if args else kwargs  # albumentations passes image=... as keywords
        if recorder.checking:
            return self._call_twice(args, kwargs)
        kind_in = kind_of(data)
        queued = schedclock.queue_wait_ns()
        start = time.perf_counter_ns()
        out = self._inner(*args, **kwargs)
        wall_ns = time.perf_counter_ns() - start
        own_ns = max(wall_ns - (schedclock.queue_wait_ns() - queued), 0)
        recorder._pending.append((self._position, own_ns / 1e6, wall_ns / 1e6, kind_in, kind_of(out)))
        return out

    def _call_twice(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Copy first: a stage may modify its input in place, and the second run needs the original.
        try:
            saved_args, saved_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
        except Exception:
            return self._inner(*args, **kwargs)
        out = self._inner(*args, **kwargs)
        again = self._inner(*saved_args, **saved_kwargs)
        self._recorder.same_twice[self._position].append(same_value(out, again))
        return out


def same_value(a: Any, b: Any) -> bool:
    """Equality that understands arrays, tensors and PIL images (for determinism checks)."""
    if type(a) is not type(b):
        return False
    kind = kind_of(a) if not isinstance(a, (dict, list, tuple)) else ""
    if kind == "numpy":
        import numpy as np

        return a.shape == b.shape and bool(np.array_equal(a, b))
    if kind == "tensor":
        import torch

        return a.shape == b.shape and bool(torch.equal(a, b))
    if kind == "pil":
        return a.size == b.size and a.mode == b.mode and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


@dataclass
class InstalledChain:
    """A chain whose stages are wrapped; ``restore()`` puts the original stages back."""

    attribute: str
    kind: str
    stages: list[Any]
    recorder: StageRecorder
    _restore: Callable[[], None]

    def restore(self) -> None:
        self._restore()


def find_chain(dataset: Any, transform_attr: str | None) -> tuple[Any, str, str] | None:
    """Return (holder, attribute name, dotted path) of the dataset's transform, or None."""
    if transform_attr:
        holder, path = dataset, list[str]()
        parts = transform_attr.split(".")
        for part in parts[:-1]:
            if not hasattr(holder, part):
                raise UserError(f"the dataset has no attribute '{'.'.join([*path, part])}' (--transform-attr)")
            holder = getattr(holder, part)
            path.append(part)
        if not hasattr(holder, parts[-1]):
            raise UserError(f"the dataset has no attribute '{transform_attr}' (--transform-attr)")
        return holder, parts[-1], transform_attr
    holder, prefix = dataset, ""
    for _ in range(4):  # look through wrappers such as torch Subset (.dataset)
        for name in CANDIDATE_ATTRS:
            value = getattr(holder, name, None)
            if value is not None and (callable(value) or _callable_list(value)):
                return holder, name, prefix + name
        inner = getattr(holder, "dataset", None)
        if inner is None:
            return None
        holder, prefix = inner, prefix + "dataset."
    return None


def _callable_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(callable(v) for v in value)


def install(dataset: Any, transform_attr: str | None) -> InstalledChain | None:
    """Wrap every stage of the dataset's chain in a ``TimedStage``; None when there is no chain."""
    found = find_chain(dataset, transform_attr)
    if found is None:
        return None
    holder, name, path = found
    value = getattr(holder, name)
    inner_list = getattr(value, "transforms", None)
    if _callable_list(inner_list):
        container, attr, kind, path = value, "transforms", "compose", path + ".transforms"
    elif _callable_list(value):
        container, attr, kind = holder, name, "list"
    elif callable(value):
        container, attr, kind = holder, name, "callable"
    else:
        raise UserError(f"'{path}' is neither callable nor a list of callables (--transform-attr)")
    original = getattr(container, attr)
    stages = list(original) if kind != "callable" else [original]
    recorder = StageRecorder(stages=len(stages))
    wrapped = [TimedStage(stage, recorder, i) for i, stage in enumerate(stages)]
    if kind == "callable":
        setattr(container, attr, wrapped[0])
    elif isinstance(original, list):
        original[:] = wrapped  # in place: other references to the same list see the proxies too
    else:
        setattr(container, attr, type(original)(wrapped))

    def restore() -> None:
        if kind != "callable" and isinstance(original, list):
            original[:] = stages
        else:
            setattr(container, attr, original)

    return InstalledChain(attribute=path, kind=kind, stages=stages, recorder=recorder, _restore=restore)


def churn(path: tuple[str, ...]) -> tuple[int, int]:
    """(conversions, round trips) along one sample's sequence of kinds through the chain."""
    conversions = round_trips = 0
    seen: set[str] = set()
    previous: str | None = None
    for kind in path:
        if previous is not None and kind != previous and {kind, previous} <= ARRAY_KINDS:
            conversions += 1
            if kind in seen:
                round_trips += 1
        seen.add(kind)
        previous = kind
    return conversions, round_trips

"""What is being tuned: the user's dataset (and, when they gave a DataLoader, its collate_fn,
sampler and settings, which become the baseline)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from supplyline.errors import UserError
from supplyline.target import UserDataset, load_attr, resolve_dataset
from supplyline.tune.space import LoaderConfig


class DatasetItemError(Exception):
    """An item of the user's dataset raised. The index is in the message so that it survives the
    trip back from a DataLoader worker, which re-creates exceptions from their text."""

    PATTERN = re.compile(r"dataset\[(\d+)\] raised ([^\n]*)")

    def __init__(self, message: str) -> None:
        super().__init__(message)


def item_error_in(exc: BaseException) -> str | None:
    """``dataset[17] raised ValueError: ...`` if ``exc`` (or its text) carries an item failure."""
    match = DatasetItemError.PATTERN.search(str(exc))
    return match.group(0) if match else None


class _ItemTimeout(BaseException):
    """Raised by the alarm into an item that hangs. A BaseException, so that the dataset's own
    ``except Exception`` cannot swallow it."""


# The per-item time limit in this process (the one that runs tune): DataLoader workers have the
# DataLoader's own timeout, but the probe and num_workers=0 load items in this process, where a
# hung item would hang tune itself. Set by item_deadline(), read by IndexReportingDataset.
_deadline: dict[str, Any] = {"seconds": None, "pid": None}


@contextlib.contextmanager
def item_deadline(seconds: float) -> Iterator[None]:
    """Within this block, an item loaded in this process that takes longer than ``seconds``
    fails as ``dataset[i] raised TimeoutError``. Only the main thread can take signals, so
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    _deadline.update(seconds=seconds, pid=os.getpid())
    try:
        yield
    finally:
        _deadline.update(seconds=None, pid=None)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _ItemTimeout()


def _arm() -> float | None:
    seconds = _deadline["seconds"]
    if seconds is None or _deadline["pid"] != os.getpid() or threading.current_thread() is not threading.main_thread():
        return None
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return float(seconds)


def _disarm(armed: float | None) -> None:
    if armed is not None:
        signal.setitimer(signal.ITIMER_REAL, 0)


class IndexReportingDataset:
    """Wraps a map-style dataset so that a failing item names its index, and so that an item
    that hangs (in this process, see item_deadline) or calls sys.exit() fails with its index too.

    Defined here, at module level, so that spawn-started workers can unpickle it.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        armed = _arm()
        try:
            return self.dataset[index]
        except _ItemTimeout:
            raise DatasetItemError(
                f"dataset[{index}] raised TimeoutError: no item after {armed:g} s (a hung read or lock?)"
            ) from None
        except SystemExit as exc:
            raise DatasetItemError(
                f"dataset[{index}] raised SystemExit: the dataset called sys.exit({exc.code})"
            ) from None
        except Exception as exc:
            raise DatasetItemError(f"dataset[{index}] raised {type(exc).__name__}: {exc}") from exc
        finally:
            _disarm(armed)

    def __getitems__(self, indices: list[int]) -> list[Any]:
        # Keeps a user's batched fetch (PyTorch's fetcher calls __getitems__ when it exists).
        batched = getattr(self.dataset, "__getitems__", None)
        if not batched:
            return [self[i] for i in indices]
        armed = _arm()
        try:
            return list(batched(indices))
        except _ItemTimeout:
            first = indices[0] if indices else 0
            raise DatasetItemError(
                f"dataset[{first}] raised TimeoutError: no batch from __getitems__ after {armed:g} s"
            ) from None
        except (Exception, SystemExit):
            _disarm(armed)
            armed = None
            for i in indices:  # only on failure: find the item to name it
                self[i]
            raise
        finally:
            _disarm(armed)


@dataclass
class TuneTarget:
    """A dataset plus what the user's own DataLoader (if any) fixes."""

    spec: str
    dataset: Any
    baseline: LoaderConfig
    length: int | None  # items per epoch (None: an IterableDataset without len)
    loader_kwargs: dict[str, Any] = field(default_factory=dict)  # collate_fn, sampler, drop_last, ...
    from_loader: bool = False

    def make_loader(self, config: LoaderConfig, timeout_s: float = 0.0) -> Any:
        from torch.utils.data import DataLoader

        kwargs = dict(self.loader_kwargs)
        kwargs.update(config.loader_kwargs())
        if config.num_workers > 0 and timeout_s > 0:
            kwargs["timeout"] = timeout_s  # a hung worker becomes a failed configuration
        return DataLoader(self.dataset, **kwargs)

    def batches_per_epoch(self, batch_size: int) -> int | None:
        if self.length is None:
            return None
        if self.loader_kwargs.get("drop_last"):
            return self.length // batch_size
        return -(-self.length // batch_size)


# What tune accepts, finishing "NAME is a int, not ..." for anything else.
_ACCEPTS = "a Dataset, a DataLoader, or a callable returning one (a Dataset needs __getitem__ and __len__, or __iter__)"


def resolve_target(spec: str, batch_size: int | None) -> TuneTarget:
    """Load ``MODULE:ATTR`` and make a TuneTarget, with one-line errors for anything unusable."""
    found = resolve_dataset(load_attr(spec), spec, not_a_dataset=_ACCEPTS)
    if found.loader is not None:
        return _from_loader(spec, found, batch_size)
    return _from_dataset(spec, found, batch_size or 64, {}, from_loader=False)


def target_for_dataset(name: str, dataset: Any, batch_size: int) -> TuneTarget:
    """A TuneTarget for a dataset object in hand (benchmarks, integrations), PyTorch defaults as
    the baseline."""
    return _from_dataset(name, resolve_dataset(dataset, name, not_a_dataset=_ACCEPTS), batch_size, {}, False)


def _from_loader(spec: str, found: UserDataset, batch_size: int | None) -> TuneTarget:
    from torch.utils.data import RandomSampler, SequentialSampler

    loader: Any = found.loader  # not None: resolve_target only comes here with one
    if loader.batch_size is None:
        raise UserError(f"{spec} uses a custom batch_sampler; pass its dataset instead so batch size can be set")
    kept: dict[str, Any] = {"drop_last": loader.drop_last}
    if loader.collate_fn is not None and not _is_default_collate(loader.collate_fn):
        kept["collate_fn"] = loader.collate_fn
    if loader.worker_init_fn is not None:
        kept["worker_init_fn"] = loader.worker_init_fn
    if isinstance(loader.sampler, RandomSampler):
        kept["shuffle"] = True  # a fresh RandomSampler per loader, as the user's code makes
    elif not isinstance(loader.sampler, SequentialSampler):
        kept["sampler"] = loader.sampler
    target = _from_dataset(spec, found, batch_size or loader.batch_size, kept, from_loader=True)
    ctx = loader.multiprocessing_context
    target.baseline = LoaderConfig(
        batch_size=target.baseline.batch_size,
        num_workers=loader.num_workers,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        pin_memory=bool(loader.pin_memory),
        start_method=ctx.get_start_method() if ctx is not None else None,
    ).normalized()
    return target


def _is_default_collate(fn: Callable[..., Any]) -> bool:
    from torch.utils.data import default_collate
    from torch.utils.data._utils.collate import default_convert

    return fn is default_collate or fn is default_convert


def _from_dataset(
    spec: str, found: UserDataset, batch_size: int, kept: dict[str, Any], from_loader: bool
) -> TuneTarget:
    from torch.utils.data import IterableDataset

    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, not {batch_size}")
    length = found.length
    if length is not None and kept.get("drop_last") and length < batch_size:
        raise UserError(
            f"{spec} has {length} items, fewer than one batch of {batch_size} with drop_last=True; lower --batch-size"
        )
    # An IterableDataset has no indices to report; its errors name the item count instead.
    iterable = isinstance(found.dataset, IterableDataset)
    return TuneTarget(
        spec=spec,
        dataset=found.dataset if iterable else IndexReportingDataset(found.dataset),
        baseline=LoaderConfig(batch_size=batch_size),
        length=length,
        loader_kwargs=kept,
        from_loader=from_loader,
    )

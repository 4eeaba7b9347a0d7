"""Datasets that keep state about their own iteration, and what a second loader over them must not share.

A trial (and, later, an adapting run) builds a new loader over the script's dataset while the
script's own iterator is paused, not finished. Most datasets are plain objects the new loader's
workers copy when they fork. Two libraries keep iteration state on the dataset object itself, read
off their source at the pinned versions:

- **litdata** (0.2.76): ``StreamingDataLoader.__init__`` and ``__iter__`` write the batch size,
  worker count and epoch onto the dataset (``set_num_workers``, ``set_epoch``), and a
  ``StreamingDataset`` splits its chunks by them when an epoch starts. A new loader built over the
  script's own 0-worker dataset would leave it set for 2 workers: its next epoch would read a share
  of the data as worker 0 of 2. The new loader gets a shallow copy to write on.
- **MosaicML streaming** (0.13.0): ``StreamingDataset.__iter__`` first calls
  ``self._iterator.exit()`` on the iteration before it, which waits for that iteration's download
  threads to stop. A worker forked from a process whose own loader iterates in-process
  (``num_workers=0``) inherits that ``_iterator`` but not its threads, and waits forever: the job
  hung in the trial's first batch. The copy drops ``_iterator``, ``_executor`` and ``_event``
  (threads, a thread pool and an event of the process that made them), so a worker starts its own.
  Its file locks are made lazily, in the process that first takes them, and filelock refuses one
  inherited across a fork ("UnixFileLock ... was inherited across fork"): the copy drops the cache
  lock and gets its own shared barrier object (the same shared memory and lock file) without one.
  It also drops ``_locals_shm``, whose ``__del__`` would release the original's claim on its local
  folder when the trial's loader is dropped.
  Each ``__iter__`` also advances the epoch counter the dataset keeps in shared memory
  (``next_epoch``): :func:`hold_epoch` puts it back when the trial ends, so the script's next epoch
  is the one it would have been (its shuffle is seeded by it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from supplyline.collect.dataset_kind import is_mosaic

LITDATA = "litdata."  # loader classes whose __init__ and __iter__ set state on the dataset
# made by __iter__ and tied to its process's threads, or made lazily and refused after a fork, or
# released by __del__
MOSAIC_PROCESS_STATE = ("_iterator", "_executor", "_event", "_cache_filelock", "_locals_shm")


def is_litdata_loader(loader: Any) -> bool:
    """A litdata ``StreamingDataLoader`` (or another loader class of litdata's)."""
    return type(loader).__module__.startswith(LITDATA)


def copies_dataset(loader: Any) -> bool:
    """Whether a new loader over ``loader``'s dataset gets a copy of it (see the module's text)."""
    return is_litdata_loader(loader) or is_mosaic(getattr(loader, "dataset", None))


def dataset_for_new_loader(loader: Any) -> Any:
    """The dataset a new loader over ``loader``'s data is built on: the dataset itself, or a copy
    that keeps none of the script's iteration state."""
    dataset = loader.dataset
    if not copies_dataset(loader):
        return dataset
    dataset = copy.copy(dataset)
    if is_mosaic(dataset):
        for name in MOSAIC_PROCESS_STATE:
            dataset.__dict__.pop(name, None)
        barrier = dataset.__dict__.get("_shared_barrier")
        if barrier is not None:
            barrier = copy.copy(barrier)
            barrier.__dict__.pop("lock", None)
            dataset._shared_barrier = barrier
    return dataset


def hold_epoch(dataset: Any) -> Callable[[], None]:
    """Call it at the start of a trial; the callable it returns, at its end, puts back the epoch
    counter a MosaicML dataset keeps in shared memory (a no-op for any other dataset)."""
    if not is_mosaic(dataset):
        return lambda: None
    try:
        epoch = int(dataset.next_epoch)
    except Exception:  # its shared memory is made at the first __iter__: nothing to hold before it
        return lambda: None

    def restore() -> None:
        dataset.next_epoch = epoch

    return restore

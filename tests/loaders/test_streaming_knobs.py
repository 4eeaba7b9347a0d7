"""A streaming library's own knobs in the fix, and the copy a trial's loader iterates: the rules, on
hand-built objects, so they run where the library is not installed (the real MosaicML package is
driven in test_mosaic.py, which needs torchvision)."""

from __future__ import annotations

import threading
from typing import Any

from supplyline.analyze.recommend import streaming_note
from supplyline.apply.dataset_state import copies_dataset, dataset_for_new_loader, hold_epoch
from supplyline.collect.dataset_kind import dataset_knobs, is_mosaic
from supplyline.collect.events import LoaderInfo


class StreamingDataset:  # MosaicML's class, as far as its module and name go
    def __init__(self, remote: str | None = None, predownload: int | None = 128) -> None:
        self.streams = [type("Stream", (), {"remote": remote})()]
        self.predownload = predownload
        self.cache_limit = None
        self.next_epoch = 3
        self._iterator = object()
        self._executor = object()
        self._event = threading.Event()
        self._locals_shm = object()
        self._shared_barrier = type("Barrier", (), {})()
        self._shared_barrier.lock = threading.Lock()


StreamingDataset.__module__ = "streaming.base.dataset"


class Decoded(StreamingDataset):  # the documented way to decode: a subclass in the user's module
    pass


def info(knobs: dict[str, Any]) -> LoaderInfo:
    return LoaderInfo(1, 16, 2, False, None, False, None, "Decoded", None, "job", dataset_knobs=knobs)


def test_the_knobs_are_read_off_a_mosaic_dataset_and_nothing_else() -> None:
    assert is_mosaic(Decoded()) and not is_mosaic(object())
    assert dataset_knobs(Decoded(remote="s3://bucket/x")) == {
        "library": "mosaicml-streaming",
        "predownload": 128,
        "cache_limit": None,
        "remote": True,
    }
    assert dataset_knobs(Decoded())["remote"] is False
    assert dataset_knobs([1, 2, 3]) == {}


def test_the_fetch_stall_sentence_names_predownload_only_where_it_downloads() -> None:
    remote = streaming_note(info(dataset_knobs(Decoded(remote="s3://bucket/x"))))
    assert "`predownload` samples ahead per worker (now 128)" in remote and "predownload=256" in remote
    local = streaming_note(info(dataset_knobs(Decoded())))
    assert "reads local shards" in local and "do not change a read" in local
    assert streaming_note(info({})) == "" and streaming_note(None) == ""


def test_the_trial_copy_keeps_none_of_the_scripts_iteration_state() -> None:
    ds = Decoded()
    loader = type("Loader", (), {"dataset": ds})()
    assert copies_dataset(loader)
    copy = dataset_for_new_loader(loader)
    assert copy is not ds and type(copy) is Decoded
    for name in ("_iterator", "_executor", "_event", "_locals_shm"):
        assert not hasattr(copy, name) and hasattr(ds, name), name
    assert not hasattr(copy._shared_barrier, "lock") and hasattr(ds._shared_barrier, "lock")
    plain = type("Loader", (), {"dataset": [1, 2]})()
    assert not copies_dataset(plain) and dataset_for_new_loader(plain) is plain.dataset


def test_the_epoch_counter_is_put_back() -> None:
    ds = Decoded()
    restore = hold_epoch(ds)
    ds.next_epoch = 5  # the trial's workers each began an epoch
    restore()
    assert ds.next_epoch == 3
    hold_epoch([1, 2])()  # any other dataset: nothing to hold

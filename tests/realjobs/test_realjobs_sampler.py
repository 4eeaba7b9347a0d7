"""Data-wait samples reach the dataset's code: the transform that costs, library frames included."""

from __future__ import annotations

import sys
import threading

import pytest
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from supplyline.collect import frames
from supplyline.collect.stack_sampler import StackSampler
from supplyline.collect.steps import StepClock

parked, release = threading.Event(), threading.Event()
_real_resize = Image.Image.resize


def _parked_resize(self, *args, **kwargs):  # its code is re-filed under PIL's Image.py: a library frame
    parked.set()
    release.wait(30)
    return _real_resize(self, *args, **kwargs)


class Resize:
    def __call__(self, img):
        return img.resize((8, 8))  # the user's line that calls the library


class UserImages(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return Resize()(Image.new("RGB", (16, 16))).size


def _sample_parked(dataset, monkeypatch) -> StackSampler:
    """Run one num_workers=0 fetch on a thread, parked inside PIL's resize; sample its stack once."""
    monkeypatch.setattr(Image.Image, "resize", _parked_resize)
    parked.clear()
    release.clear()
    worker = threading.Thread(target=lambda: next(iter(DataLoader(dataset, batch_size=2, num_workers=0))))
    worker.start()
    assert parked.wait(30)
    sampler = StackSampler(StepClock())
    try:
        sampler._record(sys._current_frames()[worker.ident], "data_wait")
    finally:
        release.set()
        worker.join()
    return sampler


@pytest.fixture
def parked_in_library(monkeypatch):
    code = _parked_resize.__code__
    monkeypatch.setattr(_parked_resize, "__code__", code.replace(co_filename=Image.__file__))
    return monkeypatch


def test_user_dataset_sample_names_the_transform_line_and_the_library_call(parked_in_library):
    sampler = _sample_parked(UserImages(), parked_in_library)
    (key,) = sampler.counts
    assert key.phase == "data_wait" and key.function == "__call__" and key.file == __file__
    with open(__file__) as fh:
        assert "img.resize((8, 8))" in fh.readlines()[key.line - 1]
    assert key.library.startswith(Image.__file__) and key.library.endswith(":_parked_resize")
    assert key.library_leaf == key.library


def test_library_dataset_sample_names_the_library_and_the_users_for_line(parked_in_library):
    # a dataset whose code is a library's (torchvision-style): no user frame below the DataLoader
    lib_getitem = UserImages.__getitem__.__code__.replace(co_filename=Image.__file__)
    lib_call = Resize.__call__.__code__.replace(co_filename=Image.__file__)
    parked_in_library.setattr(UserImages.__getitem__, "__code__", lib_getitem)
    parked_in_library.setattr(Resize.__call__, "__code__", lib_call)
    sampler = _sample_parked(UserImages(), parked_in_library)
    (key,) = sampler.counts
    assert key.file == __file__ and key.function == "<lambda>"  # the line that iterates the loader
    assert key.library.endswith(":__getitem__")  # the library's dataset, entered from the DataLoader
    assert key.library_leaf.endswith(":_parked_resize")  # where the time is


def test_other_phases_keep_their_keys_without_library_frames():
    sampler = StackSampler(StepClock())
    sampler._record(sys._getframe(), "unhooked")
    (key,) = sampler.counts
    assert key.library == "" and key.library_leaf == "" and key.function.startswith("test_other_phases")


def test_waiting_for_workers_is_not_a_library_cost():
    assert frames.file_kind(threading.__file__) == frames.WAITING
    assert frames.file_kind(Image.__file__) == frames.LIBRARY
    assert frames.file_kind(__file__) == frames.USER

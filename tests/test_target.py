"""supplyline.target.resolve_dataset: the one unwrapping of "a Dataset, a DataLoader or a callable"
that tune and preprocess share, so both accept the same things and fail in one line."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch.utils.data as tud

from supplyline.errors import UserError
from supplyline.preprocess import Target
from supplyline.target import resolve_dataset
from supplyline.tune.target import target_for_dataset

ACCEPTS = "a dataset"


class Items:
    def __init__(self, n: int = 5) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class Stream(tud.IterableDataset):
    def __iter__(self) -> Any:
        return iter(range(3))


class Broken:
    def __init__(self) -> None:
        raise ValueError("no data dir")


def test_a_dataset_is_taken_as_it_is() -> None:
    ds = Items()
    found = resolve_dataset(ds, "m:ds", not_a_dataset=ACCEPTS)
    assert found.dataset is ds and found.loader is None and found.length == 5


def test_a_dataloader_gives_its_dataset_and_itself() -> None:
    loader = tud.DataLoader(Items(7), batch_size=3)
    found = resolve_dataset(loader, "m:loader", not_a_dataset=ACCEPTS)
    assert found.loader is loader and found.dataset is loader.dataset and found.length == 7


def test_classes_functions_and_partials_are_called_with_no_arguments() -> None:
    for factory in (Items, lambda: Items(4), functools.partial(Items, 6)):
        found = resolve_dataset(factory, "m:make", not_a_dataset=ACCEPTS)
        assert isinstance(found.dataset, Items)


def test_a_factory_that_raises_is_one_line_naming_it() -> None:
    with pytest.raises(UserError, match=r"calling m:Broken with no arguments failed: ValueError: no data dir"):
        resolve_dataset(Broken, "m:Broken", not_a_dataset=ACCEPTS)


def test_each_tool_finishes_the_not_a_dataset_sentence_in_its_own_words() -> None:
    with pytest.raises(UserError, match=r"^m:n is a int, not a dataset$"):
        resolve_dataset(42, "m:n", not_a_dataset=ACCEPTS)


def test_an_iterable_dataset_has_no_length_and_can_be_refused() -> None:
    assert resolve_dataset(Stream(), "m:s", not_a_dataset=ACCEPTS).length is None
    with pytest.raises(UserError, match=r"IterableDataset .*map-style"):
        resolve_dataset(Stream(), "m:s", not_a_dataset=ACCEPTS, iterable_ok=False)


def test_empty_and_broken_lengths_are_one_line() -> None:
    with pytest.raises(UserError, match="m:e is empty"):
        resolve_dataset(Items(0), "m:e", not_a_dataset=ACCEPTS)

    class BadLen(Items):
        def __len__(self) -> int:
            raise OSError("index file missing")

    with pytest.raises(UserError, match=r"len\(\) of m:b failed: OSError: index file missing"):
        resolve_dataset(BadLen(), "m:b", not_a_dataset=ACCEPTS)


def test_tune_and_preprocess_read_the_same_loader_the_same_way() -> None:
    loader = tud.DataLoader(Items(8), batch_size=4)
    assert Target.of(loader).dataset is loader.dataset and Target.of(loader).batch_size == 4
    assert target_for_dataset("m:ds", loader.dataset, 4).length == 8
    # The one tool difference: tune takes an IterableDataset, preprocess refuses it.
    assert target_for_dataset("m:s", Stream(), 2).length is None
    with pytest.raises(UserError, match="IterableDataset"):
        Target.of(Stream())

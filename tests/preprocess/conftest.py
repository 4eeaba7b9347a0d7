"""Fixtures for the preprocess tests: the test datasets as a real module in a temporary directory."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from types import ModuleType
from typing import Any

import pytest

from supplyline.preprocess import profile_dataset

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("pp_module"))
    shutil.copy(os.path.join(HERE, "datasets_src.py"), os.path.join(root, "pp_datasets.py"))
    return root


@pytest.fixture(scope="session")
def dsmod(dataset_dir: str) -> ModuleType:
    """``pp_datasets`` imported from the temporary directory (on sys.path, so spawn workers find it)."""
    sys.path.insert(0, dataset_dir)
    sys.modules.pop("pp_datasets", None)
    return importlib.import_module("pp_datasets")


def _quick(dataset: Any, **options: Any):
    settings: dict[str, Any] = dict(samples=20, workers=0, gil_check=False, measure_transfer=False, line_seconds=0.2)
    settings.update(options)
    return profile_dataset(dataset, **settings)


@pytest.fixture
def quick():
    """profile_dataset with the costly phases (workers, transfer, GIL) off unless a test asks for them."""
    return _quick


def _line_of(module: ModuleType, marker: str) -> int:
    with open(module.__file__) as fh:
        for number, text in enumerate(fh, 1):
            if marker in text:
                return number
    raise AssertionError(f"{marker} not in {module.__file__}")


@pytest.fixture
def line_of():
    """Line number of the first line holding a marker comment in a module's source."""
    return _line_of

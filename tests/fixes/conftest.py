"""Fixtures for the fixes tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def scratch(tmp_path) -> str:
    return str(tmp_path)

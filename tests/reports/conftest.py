"""Session fixtures for the report tests: real doctor runs, shared by every test that reads them."""

from __future__ import annotations

import os
import shutil

import pytest
from reports_helpers import XSS, doctor_run, with_monitor, zoo

from supplyline.record import RunRecord, load_record


@pytest.fixture(scope="session")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real run of a script whose path contains <script>alert(1)</script>, with fast data."""
    root = tmp_path_factory.mktemp("xss")
    weird = os.path.join(str(root), XSS)
    os.makedirs(weird)
    script = os.path.join(weird, "train.py")
    shutil.copy(zoo("chatty.py"), script)
    return doctor_run(weird, os.path.join(str(root), "base"), script, "0.0005")


@pytest.fixture(scope="session")
def slow_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same job with slow samples (30 ms each, 120 ms a batch): a planted input-pipeline regression."""
    root = tmp_path_factory.mktemp("slow")
    return doctor_run(str(root), os.path.join(str(root), "new"), zoo("chatty.py"), "0.03")


@pytest.fixture(scope="session")
def base_record(base_run: str) -> RunRecord:
    return load_record(base_run)


@pytest.fixture(scope="session")
def monitored_record(base_record: RunRecord) -> RunRecord:
    return with_monitor(base_record)

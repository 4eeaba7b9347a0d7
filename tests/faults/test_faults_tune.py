"""tune and preprocess under hostile datasets: an item that hangs, sys.exit() in the user's code,
an item that is None, an output path that cannot be written. One line each, exit 2, and the
measurement never starts when its result could not be saved."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from faults_helpers import HANG_GUARD_S, assert_one_line, child_env, supplyline, write_script

DATASETS = """
import os, sys, time

MARK = os.environ.get("FAULTS_MARK", "")

class Items:
    def __init__(self, fault):
        self.fault = fault
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if MARK:
            open(MARK, "a").close()  # shows whether any item was ever loaded
        if self.fault == "hang" and i == 0:
            time.sleep(3600)
        if self.fault == "exit":
            sys.exit(3)
        if self.fault == "none":
            return None
        return [float(i)] * 4

hangs = Items("hang")
exits = Items("exit")
nones = Items("none")
fine = Items(None)
"""

IMPORT_EXITS = """
import sys
sys.exit(4)
"""


@pytest.fixture
def here(tmp_path) -> str:
    write_script(str(tmp_path), DATASETS, "faultdata.py")
    write_script(str(tmp_path), IMPORT_EXITS, "exits_on_import.py")
    return str(tmp_path)


@pytest.mark.slow
def test_tune_item_that_hangs_fails_after_the_budget(here):
    done = supplyline(["tune", "faultdata:hangs", "--budget", "3"], cwd=here)
    assert_one_line(done, 2, "dataset[0] raised TimeoutError", "no item after 3 s")


@pytest.mark.slow
def test_tune_item_that_calls_sys_exit_is_named(here):
    done = supplyline(["tune", "faultdata:exits", "--budget", "5"], cwd=here)
    assert_one_line(done, 2, "dataset[0] raised SystemExit", "sys.exit(3)")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["tune", "preprocess"])
def test_sys_exit_at_import_is_one_line(here, command):
    done = supplyline([command, "exits_on_import:anything"], cwd=here)
    assert_one_line(done, 2, "importing 'exits_on_import' called sys.exit(4)", "__main__")


@pytest.mark.slow
def test_preprocess_item_that_calls_sys_exit_is_one_line(here):
    done = supplyline(["preprocess", "faultdata:exits", "--samples", "3", "--workers", "0"], cwd=here)
    assert_one_line(done, 2, "called sys.exit(3) while preprocess ran it")


@pytest.mark.slow
def test_tune_item_that_is_none_is_named(here):
    done = supplyline(["tune", "faultdata:nones", "--budget", "5"], cwd=here)
    assert_one_line(done, 2, "dataset[0] returned None", "collate_fn that filters out None")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["tune", "preprocess"])
def test_unwritable_json_fails_before_any_item_is_loaded(here, command):
    mark = os.path.join(here, "loaded")
    blocker = os.path.join(here, "a-file")
    open(blocker, "w").close()
    out = os.path.join(blocker, "result.json")  # a path under a file: can never be written
    done = subprocess.run(
        [sys.executable, "-m", "supplyline", command, "faultdata:fine", "--json", out],
        cwd=here,
        env=child_env({"FAULTS_MARK": mark}),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert_one_line(done, 2, f"cannot write {out}")
    assert not os.path.exists(mark)  # checked before the dataset was touched

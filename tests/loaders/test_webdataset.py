"""webdataset (the real package, a base dependency) under the doctor and `run --apply`: a WebLoader
over tar shards is seen, named and judged, its fix is written as `WebLoader(...)`, the trial rebuilds
the DataLoader inside it, and `run --apply` changes it where the WebLoader makes it.

The speed-up is measured in benchmarks/loaders.py --wds, not asserted here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("webdataset")

JOB = os.path.join(os.path.dirname(__file__), "zoo", "wds_starved.py")


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supplyline", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "100"},
    )


def _doctor(
    tmp_path, shards: str, *job: str, trial: bool = True
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = str(tmp_path / "report")
    flags = ["--try-steps", "30"] if trial else ["--no-try"]
    proc = _run(
        ["doctor", "--out", out, "--steps", "30", "--what-if-steps", "10", *flags, JOB, shards, *job], str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(out, "report.json")) as fh:
        return proc, json.load(fh)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("wds") / "shards")  # the job writes them on first use


@pytest.mark.slow
def test_a_starved_webloader_is_named_judged_tried_and_applied(
    tmp_path, shards, words_follow_figures, one_screen
) -> None:
    proc, rep = _doctor(tmp_path, shards, "2000")
    d = rep["dataloader"]
    assert (d["loader_type"], d["loader_module"]) == ("WebLoader", "webdataset.compat")
    assert rep["verdict"]["bound"] == "input" and "waiting for the WebLoader" in rep["verdict"]["sentence"]
    assert d["stall"] in ("prep", "mixed"), d
    top = rep["findings"][0]
    assert top["check"] == "dataloader" and re.search(r"WebLoader\(\.\.\., num_workers=\d", top["fix"]), top
    trial = next(t for t in rep["trials"] if t["fix"] == "dataloader")
    assert trial["measured_speedup"] is not None and trial["settings"]["num_workers"] >= 1
    assert "over the same IterableDataset" in proc.stderr  # the trial says its samples restart
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)
    applied = _run(
        ["run", "--apply", "num_workers=2,prefetch_factor=4,persistent_workers", JOB, shards, "60"], str(tmp_path)
    )
    assert applied.returncode == 0, applied.stderr
    assert "1 DataLoader(s) changed (num_workers 0→2" in applied.stderr, applied.stderr
    assert re.search(r"^rate [\d.]+ steps/s$", applied.stdout, flags=re.M), applied.stdout


@pytest.mark.slow
def test_a_healthy_webloader_keeps_up(tmp_path, shards, words_follow_figures, one_screen) -> None:
    proc, rep = _doctor(tmp_path, shards, "2000", "--healthy", "--workers", "2", trial=False)
    assert rep["dataloader"]["loader_type"] == "WebLoader"
    assert rep["verdict"]["bound"] == "compute", rep["verdict"]
    assert not any(f["check"] == "dataloader" for f in rep["findings"]), rep["findings"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)

"""``supplyline tune`` end to end, in a real child process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.slow
def test_a_small_real_run_recommends_workers_for_waiting_items(cli, ds_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "tune.json"
    proc = cli(
        [
            "tune",
            "tune_ds:sleepy",
            "--batch-size",
            "16",
            "--budget",
            "8",
            "--consumer-ms",
            "2",
            "--transfer",
            "--json",
            str(out),
        ],
        cwd=str(tmp_path),
        env=ds_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(out.read_text())
    rec = doc["recommended"]
    assert set(rec) >= {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "batch_size"}
    assert rec["batch_size"] == 16 and rec["num_workers"] >= 2  # 2 ms sleeping items: workers overlap them
    assert rec["pin_memory"] is False
    assert doc["baseline"]["config"]["num_workers"] == 0
    measured = [c for c in doc["configurations"] if c["status"] == "ok"]
    assert len(measured) >= 3 and all(c["samples_per_s"] > 0 for c in measured)
    assert doc["speedup"] > 1.5
    assert rec["code"] in proc.stdout  # the paste-ready call, on stdout
    assert f"num_workers={rec['num_workers']}" in rec["code"]
    assert "pin_memory: does not apply (no CUDA device on this machine)" in proc.stdout
    assert "transfer: not available (no CUDA device" in proc.stdout
    assert not list(tmp_path.glob(".tune.json.*"))  # the atomic write left no temporary file


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["no_such_module_xyz:ds"], "cannot import 'no_such_module_xyz'"),
        (["tune_ds:NUMBER"], "tune_ds:NUMBER is a int, not a Dataset"),
        (["tune_ds:empty"], "tune_ds:empty is empty"),
        (["tune_ds:raises", "--batch-size", "10"], "tune_ds:raises: dataset[37] raised ValueError: corrupt record"),
        (["tune_ds:slow", "--batch-size", "4", "--budget", "1"], "--budget 1s is too small to measure anything"),
        (["tune_ds:sleepy", "--budget", "0"], "--budget: must be more than 0 seconds"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(
    cli, ds_env: dict[str, str], tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "never.json"
    proc = cli(["tune", *args, "--json", str(out)], cwd=str(tmp_path), env=ds_env)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()

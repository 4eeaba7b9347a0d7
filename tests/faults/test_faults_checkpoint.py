"""AsyncCheckpointer under faults: a final save that fails on a real full disk, a restart from
step 1 in the same folder, and SIGKILL mid-save."""

from __future__ import annotations

import json
import os
import signal

import pytest
from faults_helpers import run_script, small_tmpfs, start_script, wait_for, write_script

SAVER = """
import sys, torch
from supplyline.fixes import AsyncCheckpointer

directory, mode = sys.argv[1], sys.argv[2]
ckpt = AsyncCheckpointer(directory, keep_last=2)
ckpt.save({"w": torch.full((64 * 1024,), 1.0)}, step=1)  # 256 KiB: fits
ckpt.wait()
ckpt.save({"w": torch.full((2 * 1024 * 1024,), 2.0)}, step=2)  # 8 MiB: cannot fit in 2 MiB
if mode == "raise":
    raise RuntimeError("training crashed after the save started")
if mode == "exit0":
    sys.exit(0)
print("script ended", flush=True)  # no wait(), no close()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["end", "exit0"])
def test_failed_final_save_makes_the_process_fail(tmp_path, mode):
    with small_tmpfs(str(tmp_path / "disk"), "2m") as disk:
        script = write_script(str(tmp_path), SAVER)
        done = run_script(script, disk, mode)
        assert done.returncode == 1, done.stderr
        assert "checkpoint for step 2 was not written" in done.stderr and "the disk is full" in done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(os.listdir(disk)) == ["ckpt-000000001.pt", "latest"]  # no partial file left
        with open(os.path.join(disk, "latest"), encoding="utf-8") as fh:
            assert json.load(fh)["step"] == 1


@pytest.mark.slow
def test_failed_final_save_keeps_the_scripts_own_failure(tmp_path):
    with small_tmpfs(str(tmp_path / "disk"), "2m") as disk:
        script = write_script(str(tmp_path), SAVER)
        done = run_script(script, disk, "raise")
        assert done.returncode == 1
        assert "RuntimeError: training crashed" in done.stderr  # the user's own traceback stays
        assert "checkpoint for step 2 was not written" in done.stderr


RUN = """
import sys, torch
from supplyline.fixes import AsyncCheckpointer

directory, run, last = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
with AsyncCheckpointer(directory, keep_last=2) as ckpt:
    for step in range(1, last + 1):
        ckpt.save({"run": torch.tensor(run), "step": torch.tensor(step)}, step=step)
        ckpt.wait()
"""


@pytest.mark.slow
def test_restart_from_step_one_keeps_the_new_runs_checkpoints(tmp_path):
    script = write_script(str(tmp_path), RUN)
    directory = str(tmp_path / "ckpt")
    assert run_script(script, directory, "1", "5").returncode == 0
    second = run_script(script, directory, "2", "3")
    assert second.returncode == 0, second.stderr
    # The restarted run's two newest survive; the first run's higher-numbered ones were pruned.
    assert sorted(os.listdir(directory)) == ["ckpt-000000002.pt", "ckpt-000000003.pt", "latest"]
    import torch

    for name in ("ckpt-000000002.pt", "ckpt-000000003.pt"):
        assert float(torch.load(os.path.join(directory, name))["run"]) == 2.0


LOOP = """
import sys, torch
from supplyline.fixes import AsyncCheckpointer

ckpt = AsyncCheckpointer(sys.argv[1], keep_last=2)
step = 0
while True:
    step += 1
    ckpt.save({"w": torch.full((4 * 1024 * 1024,), float(step))}, step=step)  # 16 MiB each
    print(f"SAVING {step}", flush=True)
"""


@pytest.mark.slow
def test_sigkill_mid_save_leaves_a_loadable_latest_and_no_temporaries_after_reopen(tmp_path):
    script = write_script(str(tmp_path), LOOP)
    directory = str(tmp_path / "ckpt")
    proc = start_script(script, directory)
    wait_for(lambda: "SAVING 4" in proc.stdout.readline(), "four saves")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    from supplyline.fixes import AsyncCheckpointer, load_latest

    latest = load_latest(directory)
    assert latest is not None and float(latest.state["w"][0]) == latest.step
    AsyncCheckpointer(directory).close()  # opening the folder again removes what the kill left
    assert not [name for name in os.listdir(directory) if name.startswith(".")]

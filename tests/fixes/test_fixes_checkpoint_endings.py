"""AsyncCheckpointer when the process ends: exit and SIGTERM wait for the save, SIGKILL never
leaves a partial ``latest``, a full disk is one clear error, and the torch.distributed path."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import time

import pytest
import torch
from fixes_helpers import read_until, run_child, start_child, write_script

from supplyline.errors import UserError
from supplyline.fixes import AsyncCheckpointer, load_latest

# Saves back to back, each a 32 MB tensor filled with its step number, so that a save is in
# flight nearly all the time; resumes from `latest` like a real job.
SAVING_CHILD = """
import signal, sys, torch
from supplyline.fixes import AsyncCheckpointer, load_latest

directory, mode = sys.argv[1], sys.argv[2]
stop_requested = []
if mode == "graceful":  # the usual cluster pattern: SIGTERM sets a flag, the loop saves and exits
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
previous = load_latest(directory)
step = previous.step + 1 if previous else 1
ckpt = AsyncCheckpointer(directory, keep_last=2)
weights = torch.empty(8 * 1024 * 1024)
while True:
    weights.fill_(step)
    ckpt.save({"w": weights, "step": step}, step=step)
    print(f"SAVING {step}", flush=True)
    if mode == "exit":
        sys.exit(0)  # straight out while the save is in flight
    if mode == "sigterm":
        import time; time.sleep(120)
    step += 1
    if stop_requested:
        weights.fill_(step)
        ckpt.save({"w": weights, "step": step}, step=step)
        ckpt.close()
        print(f"FINAL {step}", flush=True)
        sys.exit(0)
"""


def _assert_consistent(directory: str) -> int:
    """latest loads, and its tensor is the one of the step the pointer names. Returns the step."""
    loaded = load_latest(directory)
    assert loaded is not None
    assert loaded.state["step"] == loaded.step
    assert bool((loaded.state["w"] == float(loaded.step)).all())
    return loaded.step


@pytest.mark.slow
def test_normal_exit_waits_for_the_save_in_flight(scratch):
    script = write_script(scratch, SAVING_CHILD)
    directory = os.path.join(scratch, "ckpt")
    done = run_child(script, directory, "exit")
    assert done.returncode == 0, done.stderr
    assert _assert_consistent(directory) == 1


@pytest.mark.slow
def test_sigterm_waits_for_the_save_then_dies_by_sigterm(scratch):
    script = write_script(scratch, SAVING_CHILD)
    directory = os.path.join(scratch, "ckpt")
    proc = start_child(script, directory, "sigterm")
    read_until(proc, "SAVING 1")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert _assert_consistent(directory) == 1


@pytest.mark.slow
def test_sigterm_chains_the_programs_handler_which_can_still_save(scratch):
    script = write_script(scratch, SAVING_CHILD)
    directory = os.path.join(scratch, "ckpt")
    proc = start_child(script, directory, "graceful")
    read_until(proc, "SAVING 1")
    proc.send_signal(signal.SIGTERM)
    final = read_until(proc, "FINAL")
    proc.wait(timeout=60)
    assert proc.returncode == 0
    assert _assert_consistent(directory) == int(final.split()[1])


@pytest.mark.slow
def test_sigkill_during_saves_never_leaves_a_partial_latest(scratch):
    script = write_script(scratch, SAVING_CHILD)
    directory = os.path.join(scratch, "ckpt")
    rng = random.Random(8)
    killed_mid_write = 0
    for _ in range(3):
        proc = start_child(script, directory, "loop")
        read_until(proc, "SAVING")
        time.sleep(rng.uniform(0.0, 0.6))
        proc.kill()
        proc.wait(timeout=60)
        entries = os.listdir(directory)
        killed_mid_write += any(".tmp-" in name for name in entries)
        if "latest" in entries:
            _assert_consistent(directory)
    assert killed_mid_write > 0, "no kill landed during a write; the test proved nothing"
    final_step = _assert_consistent(directory)
    assert final_step >= 1
    AsyncCheckpointer(directory).close()  # a restart clears what the kills left behind
    assert not [name for name in os.listdir(directory) if ".tmp" in name]


@pytest.fixture
def small_disk(tmp_path):
    """A real 6 MiB file system (tmpfs), so a save can really run out of space."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'mount failed'})")
    try:
        yield str(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_full_disk_is_one_clear_error_and_keeps_the_previous_checkpoint(small_disk):
    ckpt = AsyncCheckpointer(small_disk, keep_last=3)
    ckpt.save({"w": torch.full((256 * 1024,), 1.0)}, step=1)  # 1 MiB: fits
    ckpt.wait()
    ckpt.save({"w": torch.full((2 * 1024 * 1024,), 2.0)}, step=2)  # 8 MiB: cannot fit
    with pytest.raises(UserError) as raised:
        ckpt.wait()
    message = str(raised.value)
    assert "step 2" in message and "the disk is full" in message and "8.0" in message
    assert "ckpt-000000001.pt (step 1) is still the latest checkpoint" in message
    ckpt.wait()  # reported once, not again
    assert sorted(os.listdir(small_disk)) == ["ckpt-000000001.pt", "latest"]  # no partial file
    loaded = load_latest(small_disk)
    assert loaded.step == 1 and bool((loaded.state["w"] == 1.0).all())
    ckpt.save({"w": torch.full((256 * 1024,), 3.0)}, step=3)  # the space came back
    ckpt.close()
    assert load_latest(small_disk).step == 3


def test_full_disk_with_on_error_warn_logs_once(small_disk, caplog):
    with AsyncCheckpointer(small_disk, on_error="warn") as ckpt:
        ckpt.save({"w": torch.zeros(2 * 1024 * 1024)}, step=1)
        ckpt.wait()  # does not raise
    errors = [r for r in caplog.records if r.name == "supplyline.fixes" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "the disk is full" in errors[0].getMessage()
    assert load_latest(small_disk) is None


DISTRIBUTED_CHILD = """
import os, sys, torch
import torch.distributed as dist
from supplyline.fixes import AsyncCheckpointer, load_latest

directory = sys.argv[1]
dist.init_process_group("gloo", init_method=f"file://{directory}.rendezvous", rank=0, world_size=1)
model = torch.nn.Linear(64, 64)
expected = {k: v.clone() for k, v in model.state_dict().items()}
with AsyncCheckpointer(directory, keep_last=1) as ckpt:
    ckpt.save({"model": model.state_dict()}, step=10)
    with torch.no_grad():
        model.weight.add_(1.0)  # training goes on while async_save writes
    ckpt.save({"model": model.state_dict()}, step=20)
print("ENTRIES", sorted(os.listdir(directory)))
whole = load_latest(directory)
print("WHOLE", whole.step, torch.equal(whole.state["model"]["weight"], model.weight.detach()))
into = {"model": torch.nn.Linear(64, 64).state_dict()}
load_latest(directory, into=into)
print("INTO", torch.equal(into["model"]["weight"], model.weight.detach()))
dist.destroy_process_group()
"""


@pytest.mark.slow
# torch's gloo/DCP teardown at interpreter exit aborted once in ~5 CI runs ("terminate called without
# an active exception", after every line below had printed): one rerun, every assertion kept.
@pytest.mark.flaky(reruns=1)
def test_distributed_run_uses_dcp_async_save(scratch):
    if not hasattr(__import__("torch.distributed.checkpoint").distributed.checkpoint, "async_save"):
        pytest.skip(f"torch {torch.__version__} has no torch.distributed.checkpoint.async_save")
    script = write_script(scratch, DISTRIBUTED_CHILD)
    directory = os.path.join(scratch, "dcp")
    done = run_child(script, directory)
    assert done.returncode == 0, done.stderr
    assert "ENTRIES ['ckpt-000000020.dcp', 'latest']" in done.stdout
    assert "WHOLE 20 True" in done.stdout
    assert "INTO True" in done.stdout
    assert os.path.exists(os.path.join(directory, "ckpt-000000020.dcp", ".metadata"))

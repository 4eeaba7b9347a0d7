"""Background saves never harm the job: the checkpoint idioms of real training code (timm's
CheckpointSaver, keep-last-k rotation, getsize, copies, uploads by a child process, torch.load,
save-then-remove, folder listings) give byte-identical files and the same exit code under plain
python, under ``run --apply async_save`` and under the doctor's checkpoint trial; a save that fails
fails the same way in all three; a crash inside a trial is reported as such and voids its figure.

Each mode is a real process running tests/faults/zoo/save_idioms.py; one run per mode is shared by
the assertions that read it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass

import pytest
from faults_helpers import files_under, run_script, small_tmpfs, start_supplyline, supplyline, wait_for

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo", "save_idioms.py")
# The doctor observes 9 steps and then tries the checkpoint fix for 24: saves every 3 steps fall in
# both A and B stretches. The script would run 60; the doctor stops it after the trial.
DOCTOR = ["doctor", "--steps", "9", "--no-what-if", "--try-steps", "24", "--quiet"]
MODES = ("plain", "apply", "doctor")


@dataclass
class Done:
    mode: str
    proc: subprocess.CompletedProcess[str]
    ckpt: str
    upload: str
    report: str


def start(mode: str, root: str, *script_args: str) -> Done:
    ckpt, upload, report = (os.path.join(root, mode, n) for n in ("ckpt", "upload", "report"))
    os.makedirs(upload, exist_ok=True)
    os.makedirs(ckpt, exist_ok=True)
    return run_mode(mode, ckpt, upload, report, *script_args)


def run_mode(mode: str, ckpt: str, upload: str, report: str, *script_args: str) -> Done:
    args = [ZOO, ckpt, upload, *script_args]
    if mode == "plain":
        proc = run_script(*args)
    elif mode == "apply":
        proc = supplyline(["run", "--apply", "async_save", *args])
    else:
        proc = supplyline([*DOCTOR, "--out", report, *args])
    return Done(mode, proc, ckpt, upload, report)


def digests(root: str) -> dict[str, str]:
    out = {}
    for name in files_under(root):
        path = os.path.join(root, name)
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                out[name] = hashlib.md5(fh.read()).hexdigest()
    return out


def saved_lines(done: Done) -> list[str]:
    return [line for line in done.proc.stdout.splitlines() if re.match(r"step \d+: saved \d+ bytes", line)]


@pytest.fixture(scope="module")
def idioms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Done]:
    root = str(tmp_path_factory.mktemp("idioms"))
    doctor = start("doctor", root, "60")
    assert doctor.proc.returncode == 0, doctor.proc.stderr
    # The doctor stopped the job after its trial: the others run exactly as many steps.
    last = int(saved_lines(doctor)[-1].split()[1].rstrip(":"))
    runs = {"doctor": doctor}
    for mode in ("plain", "apply"):
        runs[mode] = start(mode, root, str(last))
    return runs


@pytest.mark.slow
def test_the_idioms_end_with_byte_identical_files_and_the_same_exit_code(idioms):
    plain = idioms["plain"]
    assert plain.proc.returncode == 0, plain.proc.stderr
    want_ckpt, want_upload = digests(plain.ckpt), digests(plain.upload)
    assert "last.pth.tar" in want_ckpt and "model.safetensors" in want_ckpt
    for mode in ("apply", "doctor"):
        done = idioms[mode]
        assert done.proc.returncode == 0, f"{mode}: {done.proc.stderr}"
        assert digests(done.ckpt) == want_ckpt, mode  # no file missing, none extra (no tmp, no staging folder)
        assert digests(done.upload) == want_upload, mode  # every child-process copy saw the whole file
        assert saved_lines(done) == saved_lines(plain), mode  # getsize saw the full file at once


@pytest.mark.slow
def test_the_saves_really_went_to_the_background(idioms):
    # Otherwise the identity above would prove nothing.
    assert "checkpoint(s) written in the background" in idioms["apply"].proc.stderr
    assert not re.search(r"\b0 checkpoint\(s\) written in the background", idioms["apply"].proc.stderr)
    with open(os.path.join(idioms["doctor"].report, "report.json"), encoding="utf-8") as fh:
        trials = json.load(fh)["trials"]
    checkpoint = [t for t in trials if t["fix"] == "checkpoint"]
    assert checkpoint, trials
    assert [s["label"] for s in checkpoint[0]["segments"]].count("B") >= 2
    assert "save(s)" in checkpoint[0]["note"] and "crashed" not in json.dumps(checkpoint[0])


@pytest.mark.slow
def test_each_idiom_saw_what_a_synchronous_save_leaves(idioms):
    for mode in MODES:
        done = idioms[mode]
        names = sorted(os.listdir(done.ckpt))
        assert "tmp.pth.tar" not in names, (mode, names)  # atomic replace: the temporary name was renamed away
        assert len([n for n in names if n.startswith("checkpoint-")]) == 2, (mode, names)  # rotation kept 2
        assert "model_best.pth.tar.new" not in names and "model_best.pth.tar" in names, mode  # copy, then remove
        assert os.listdir(done.upload) and "scratch.pt" not in os.listdir(done.upload), mode  # save-then-remove
        assert not [n for n in names if n.startswith(".supplyline")], (mode, names)


FAULTS = ("read-only folder", "full disk")


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_a_failing_save_fails_the_same_way_in_every_mode(tmp_path, fault):
    seen = {}
    with small_tmpfs(str(tmp_path / "disk"), "1m") as disk:
        for mode in MODES:
            ckpt = os.path.join(disk, mode)
            os.makedirs(ckpt)
        if fault == "read-only folder":
            remount = subprocess.run(["mount", "-o", "remount,ro", disk], capture_output=True, text=True)
            if remount.returncode != 0:
                pytest.skip(f"cannot remount read-only here: {remount.stderr.strip()}")
        for mode in MODES:  # 4 MB states: the first save cannot land on a 1 MB disk
            upload = str(tmp_path / mode / "upload")
            os.makedirs(upload)
            done = run_mode(mode, os.path.join(disk, mode), upload, str(tmp_path / mode / "report"), "12")
            assert done.proc.returncode != 0, f"{mode}: {done.proc.stderr}"
            errors = re.findall(r"^(\w+(?:Error|Exception)): ", done.proc.stderr, re.M)
            assert errors, f"{mode}: {done.proc.stderr}"
            seen[mode] = (done.proc.returncode, errors[-1], saved_lines(done))
            if mode != "plain":  # nothing of ours left on the disk, even half-written
                assert not [n for n in os.listdir(os.path.join(disk, mode)) if n.startswith(".supplyline")]
    assert seen["apply"] == seen["plain"] and seen["doctor"] == seen["plain"], seen
    assert seen["plain"][2] == []  # the very first save failed, as it must on that disk


@pytest.mark.slow
def test_a_crash_inside_the_trial_is_named_and_voids_its_figure(tmp_path):
    # Step 20 falls inside the checkpoint trial (steps 10-33).
    plain = start("plain", str(tmp_path), "60", "3", "4", "20")
    doctor = start("doctor", str(tmp_path), "60", "3", "4", "20")
    assert plain.proc.returncode == doctor.proc.returncode == 1
    for done in (plain, doctor):
        assert "RuntimeError: planted failure at step 20" in done.proc.stderr  # the script's own traceback
    assert digests(doctor.ckpt) == digests(plain.ckpt)  # the saves before the crash all landed
    with open(os.path.join(doctor.report, "report.json"), encoding="utf-8") as fh:
        report = json.load(fh)
    trial = next(t for t in report["trials"] if t["fix"] == "checkpoint")
    assert trial["measured_speedup"] is None and trial["trial_steps_per_s"] is None and not trial["spread"]
    assert "during the fix trial (checkpoint)" in trial["note"] and "not a measurement" in trial["note"]
    assert "RuntimeError" in trial["note"]


@pytest.mark.slow
def test_sigkill_mid_background_save_leaves_no_half_file_and_the_next_run_sweeps_it(tmp_path):
    ckpt, upload = tmp_path / "ckpt", tmp_path / "upload"
    ckpt.mkdir()
    upload.mkdir()
    # 64 MB states: each write takes long enough to be caught in the staging folder.
    proc = start_supplyline(["run", "--apply", "async_save", ZOO, str(ckpt), str(upload), "600", "3", "64"])
    try:
        wait_for(lambda: any(n.startswith(".supplyline-save-") for n in os.listdir(ckpt)), "a background save")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()
    import torch

    for name in os.listdir(ckpt):  # whatever has its final name is whole
        if os.path.isfile(ckpt / name) and name.endswith((".pt", ".tar")):
            state = torch.load(ckpt / name)  # a partial file would not load
            assert "weights" not in state or state["weights"].numel() == 64 * 2**18, name
    assert [n for n in os.listdir(ckpt) if n.startswith(".supplyline-save-")]  # the partial stayed aside
    again = supplyline(["run", "--apply", "async_save", ZOO, str(ckpt), str(upload), "3", "3", "1"])
    assert again.returncode == 0, again.stderr
    assert not [n for n in os.listdir(ckpt) if n.startswith(".supplyline-save-")]  # the dead one's was removed

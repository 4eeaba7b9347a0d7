"""The planted-bottleneck zoo: each script has one known cause; the doctor must name it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def top(report):
    return report["findings"][0] if report["findings"] else None


def test_python_preprocessing_with_no_workers(doctor, zoo_path):
    # 200 Hz: the data-wait lines rest on ~100 samples (at 25 Hz, ~12; one loaded run got none)
    run = doctor("--steps", "30", "--what-if-steps", "10", "--sample-hz", "200", zoo_path("prep_workers0.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["verdict"]["bound"] == "input"
    assert top(rep)["check"] == "dataloader"
    assert "num_workers=" in top(rep)["fix"]
    # the exact commands for this dataset, runnable as they stand
    assert "supplyline tune " in top(rep)["fix"] and "prep_workers0.py:PythonPrep --batch-size 16" in top(rep)["fix"]
    assert rep["dataloader"]["preprocess_command"].endswith("prep_workers0.py:PythonPrep")
    # where the wait goes: the dataset's own line, never the launcher or the console script
    assert rep["data_wait_lines"] and rep["data_wait_lines"][0]["file"].endswith("prep_workers0.py")
    # one input finding: the per-sample CPU work is a cause inside it, not a second finding with the same gain
    assert [f["check"] for f in rep["findings"] if f["check"] in ("dataloader", "preprocessing", "storage")] == [
        "dataloader"
    ]
    assert any(c.startswith("per-sample CPU work") for c in top(rep)["causes"])
    assert "supplyline preprocess " in top(rep)["fix"]
    assert "the next 10 steps are what-if replays" in run.proc.stderr
    assert rep["dataloader"]["num_workers"] == 0
    assert rep["dataloader"]["stall"] in ("prep", "mixed")
    assert rep["whatif"]["ran"] and rep["whatif"]["compute_only_steps_per_s"] > rep["whatif"]["observed_steps_per_s"]
    assert "stopped after 30 steps" in run.proc.stderr


def test_storage_latency_with_idle_workers(doctor, zoo_path):
    run = doctor("--steps", "50", "--what-if-steps", "8", zoo_path("storage_latency.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["verdict"]["bound"] == "input"
    assert top(rep)["check"] == "storage", rep["findings"]
    assert rep["dataloader"]["stall"] == "fetch"


def test_checkpoint_every_few_steps(doctor, tmp_path, zoo_path):
    run = doctor("--steps", "15", "--no-what-if", zoo_path("checkpoint_often.py"), str(tmp_path))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["verdict"]["bound"] == "checkpoint"
    assert top(rep)["check"] == "checkpoint"
    assert "checkpoint_often.py" in top(rep)["evidence"]


def test_synchronous_logging_with_fsync(doctor, tmp_path, zoo_path):
    run = doctor("--steps", "40", "--no-what-if", zoo_path("logging_fsync.py"), str(tmp_path))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["verdict"]["bound"] == "logging"
    assert top(rep)["check"] == "logging"


def test_healthy_compute_bound_job_has_no_alarm(doctor, zoo_path):
    run = doctor("--steps", "40", "--what-if-steps", "5", zoo_path("healthy.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["verdict"]["bound"] == "compute"
    assert not [f for f in rep["findings"] if f["severity"] == "high"]
    assert "keeps up" in rep["verdict"]["sentence"]


def test_no_dataloader_and_no_optimizer(doctor, zoo_path):
    run = doctor(zoo_path("no_loader_no_opt.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    rep = run.report
    assert rep["steps"]["observed"] >= 50  # backward calls mark the steps
    assert any("no DataLoader was seen" in n for n in rep["notes"])


def test_crash_at_step_keeps_report_traceback_and_exit_code(doctor, zoo_path):
    run = doctor(zoo_path("crash_at_step.py"))
    assert run.proc.returncode == 1
    assert "RuntimeError: planted failure at step 12" in run.proc.stderr
    assert 'crash_at_step.py", line' in run.proc.stderr
    # the script's own traceback, not ours: it starts at the script's frame
    assert "supplyline/launch.py" not in run.proc.stderr and "runpy" not in run.proc.stderr
    rec = run.record
    assert rec["outcome"]["reason"] == "exception"
    # Step 12 made its optimizer update before raising, so steps 0..12 are complete.
    assert len(rec["steps"]["duration_s"]) == 13


def test_two_optimizers_per_batch_and_validation_loader(doctor, zoo_path):
    run = doctor(zoo_path("gan_two_optimizers.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    assert "BATCHES 40" in run.proc.stdout
    rec = run.record
    # 40 batches -> 40 steps at most (the last of each epoch may end at the validation loop);
    # validation batches are never counted as steps.
    assert 38 <= len(rec["steps"]["duration_s"]) <= 40
    assert all(b == 1 for b in rec["steps"]["batches"])
    roles = sorted(ld["role"] for ld in rec["loaders"])
    assert roles == ["other", "train"]
    assert rec["outside_steps_s"]["eval_loader_wait"] > 0


def test_gradient_accumulation_counts_updates(doctor, zoo_path):
    run = doctor(zoo_path("grad_accum.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    steps = run.record["steps"]
    assert len(steps["duration_s"]) == 30  # 120 batches / 4 per update
    assert all(b == 4 for b in steps["batches"])


def test_data_wait_share_agrees_with_the_scripts_own_meter(doctor, zoo_path):
    run = doctor(zoo_path("meter.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    line = next(x for x in run.proc.stdout.splitlines() if x.startswith("METER"))
    theirs = float(line.split("=")[1])
    ours = run.report["phase_share"]["data_wait"]
    assert abs(ours - theirs) <= 0.03, (ours, theirs)


def test_demo_diagnoses_the_bundled_starved_job(cli, tmp_path, words_follow_figures, one_screen):
    proc = cli(["demo", "--out", str(tmp_path / "r"), "--steps", "25"], cwd=str(tmp_path), env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    import json

    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["verdict"]["bound"] == "input"
    assert rep["findings"][0]["check"] == "dataloader"
    assert "Verdict" in proc.stderr
    assert rep["trials"], "the demo runs its loader trial"
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)  # ≤ 30 lines at 100 columns, the fix and the gain are the trial's
    assert "Fix (dataloader)" in proc.stderr and "Gain: measured" in proc.stderr

"""Real-world-shaped jobs under `supplyline doctor`: the record carries the evidence the findings need.

Each script lives in zoo/; each test asserts the RECORD (checkpoint grouping and cadence, eval spans,
data-wait lines that reach the transform) and the fix text the snippet functions give for it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from supplyline.collect.checkpoints import cadence, group_checkpoints
from supplyline.fixes.snippets import checkpoint_fix_snippet, dataloader_fix_snippet, framework_of, logging_fix_snippet

pytestmark = pytest.mark.slow


def test_hf_trainer_safetensors_checkpoints_are_four_checkpoints_every_five_steps(doctor, zoo_path, tmp_path):
    pytest.importorskip("transformers")
    run = doctor("--no-what-if", zoo_path("hf_trainer_ckpt.py"), str(tmp_path / "hf"), "20")
    assert run.proc.returncode == 0, run.proc.stderr
    assert "GLOBAL_STEP 20" in run.proc.stdout
    rec = run.record
    saves = [s for s in rec["saves"] if s["in_step"]]
    # one event per Trainer checkpoint: the nested safetensors and torch.save calls are folded in
    assert [s["kind"] for s in saves] == ["hf.trainer_checkpoint"] * 4
    assert [s["step"] for s in saves] == [4, 9, 14, 19]
    for s in saves:
        names = sorted(os.path.basename(f) for f in s["files"])
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"} <= set(names)
        assert len(names) == len(set(names))  # each file once
        assert s["nested"][0] == "safetensors.save_file" and s["nested"].count("torch.save") >= 3
        assert s["bytes"] == sum(os.path.getsize(f) for f in s["files"]) and s["bytes"] > 16_000_000
        assert "transformers" in s["caller"] and s["user_caller"].endswith(":main")
    c = cadence(group_checkpoints(saves))
    assert (c.checkpoints, c.every_steps) == (4, 5.0)
    assert c.sentence().startswith("4 checkpoints, every 5 steps, ")
    # the fix is the Trainer's own setting, never a rewrite of the user's `trainer.train()` line
    assert framework_of(saves[0]["stack"]) == "hf_trainer"
    assert framework_of(next(x for x in rec["loaders"] if x["role"] == "train")["iter_stack"]) == "hf_trainer"
    snippet = checkpoint_fix_snippet("    trainer.train()", saves[0]["stack"], every_steps=5)
    assert "save_steps=500" in snippet and "trainer.train()" not in snippet
    assert "dataloader_num_workers=2" in dataloader_fix_snippet(saves[0]["stack"], num_workers=2)
    # the REPORT: the real cadence, the Trainer's own setting, the share of the phase
    rep = run.report
    (ckpt,) = [f for f in rep["findings"] if f["check"] == "checkpoint"]
    assert ckpt["evidence"].startswith("4 checkpoints, every 5 steps, "), ckpt["evidence"]
    assert f"{len(saves[0]['files'])} files each" in ckpt["evidence"], ckpt["evidence"]  # one checkpoint, many files
    assert "TrainingArguments(" in ckpt["fix"] and "save_steps=500" in ckpt["fix"] and "every 5 steps" in ckpt["fix"]
    assert "trainer.train()" not in ckpt["fix"] and "checkpointer.save" not in ckpt["fix"]
    assert ckpt["share_of_step_time"] == rep["phase_share"]["checkpoint"] > 0.05
    assert rep["checkpoints"]["checkpoints"] == 4 and rep["checkpoints"]["cadence"].startswith("4 checkpoints")


def test_nanogpt_memmap_job_counts_the_first_update(doctor, zoo_path, tmp_path):
    run = doctor(zoo_path("nanogpt_memmap.py"), str(tmp_path), "30")
    assert run.proc.returncode == 0, run.proc.stderr
    assert "ITERS 30" in run.proc.stdout
    steps = run.record["steps"]
    assert len(steps["duration_s"]) == 30  # one step per update, the first included
    assert steps["compute_hooked_s"][0] > 0
    # no loader object: the batch built in the loop is the one "loader" (collect/loop_wait.py)
    (loop,) = run.record["loaders"]
    assert loop["loader_type"] == "training loop" and loop["batches_fetched"] == 29, loop


def test_nanogpt_in_loop_evaluation_is_timed_as_eval(doctor, zoo_path, tmp_path):
    run = doctor(zoo_path("nanogpt_memmap.py"), str(tmp_path), "30")
    steps = run.record["steps"]
    assert [i for i, e in enumerate(steps["eval_s"]) if e > 0] == [10, 20]
    # the REPORT: evaluation is its own share, not compute, and no DataLoader wait is quoted
    rep = run.report
    observed = range(1, len(steps["duration_s"]))  # the first step is warm-up
    share = sum(steps["eval_s"][i] for i in observed) / sum(steps["duration_s"][i] for i in observed)
    assert rep["phase_share"]["eval"] == pytest.approx(share) and share > 0.02, share
    assert rep["phase_share"]["compute"] < 1 - share + 1e-9
    assert "DataLoader" not in rep["verdict"]["sentence"]
    if share >= 0.05:
        assert "evaluating inside the training loop" in rep["verdict"]["sentence"], rep["verdict"]
    print(f"eval share {share:.1%}; verdict: {rep['verdict']['sentence']}")


def test_costly_transform_data_wait_reaches_the_transform_and_pil(doctor, zoo_path):
    # 200 Hz: 20 steps of ~14 ms give ~50 samples, enough that the blur line (15x the tensor conversion's
    # cost) is on top every time; at the default 25 Hz it is ~7 samples and the order is a coin toss
    run = doctor("--steps", "20", "--no-what-if", "--sample-hz", "200", zoo_path("costly_transform.py"))
    assert run.proc.returncode == 0, run.proc.stderr
    waits = [s for s in run.record["line_samples"] if s["phase"] == "data_wait"]
    blur = [s for s in waits if s["function"] == "__call__" and s["library"]]
    assert blur, waits
    top = max(blur, key=lambda s: s["samples"])
    assert top["file"].endswith("costly_transform.py")
    with open(top["file"]) as fh:
        assert "GaussianBlur" in fh.readlines()[top["line"] - 1]  # the user's line that calls PIL
    assert "PIL" in top["library"] and top["library"].endswith(":filter")
    assert "PIL" in top["library_leaf"]
    train = next(x for x in run.record["loaders"] if x["role"] == "train")
    assert framework_of(train["iter_stack"]) == "plain"
    # the REPORT: one input finding, its causes inside it, the transform's line and the PIL function under it
    rep = run.report
    inputs = [f for f in rep["findings"] if f["check"] in ("dataloader", "preprocessing", "storage")]
    assert len(inputs) == 1, inputs
    (f,) = inputs
    share = rep["phase_share"]["data_wait"]
    assert f["share_of_step_time"] == share
    assert f["severity"] == ("high" if share >= 0.30 else "medium" if share >= 0.10 else "low")
    assert f["check"] == "dataloader" and "num_workers=" in f["fix"] and "DataLoader(" in f["fix"]
    assert "loader settings: num_workers=0" in f["evidence"]
    pil = [x for x in rep["data_wait_lines"] if x["library"].endswith(":filter") and "PIL" in x["library"]]
    assert pil and "GaussianBlur" in pil[0]["code"], rep["data_wait_lines"]
    # the finding points below the `for` line, at the transform and the PIL call it makes
    assert "most at costly_transform.py:" in f["evidence"] and "→ PIL/Image.py:filter" in f["evidence"], f["evidence"]
    print(f"data wait {share:.1%}; {f['severity']}; {f['evidence']}")


SLOW_READER = """
import os, sys, time
while True:
    chunk = os.read(0, 16384)
    if not chunk:
        break
    time.sleep(0.05)  # a terminal or log collector slower than the job prints
"""


def _doctor_into_slow_reader(tmp_path, *args: str) -> tuple[dict, dict]:
    out = str(tmp_path / ("rep" + str(len(os.listdir(tmp_path)))))
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER], stdin=subprocess.PIPE)
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "supplyline", "doctor", "--out", out, "--no-what-if", *args],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=300,
    )
    reader.stdin.close()
    reader.wait(timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    with open(os.path.join(out, "record.json")) as fh, open(os.path.join(out, "report.json")) as rh:
        return json.load(fh), json.load(rh)


def _logging_share(record: dict) -> float:
    st = record["steps"]
    idx = range(1, len(st["duration_s"]))
    return sum(st["logging_s"][i] for i in idx) / sum(st["duration_s"][i] for i in idx)


def test_print_heavy_job_to_a_slow_reader_gets_async_stdout_and_it_works(zoo_path, tmp_path):
    script = zoo_path("print_heavy.py")
    plain, report = _doctor_into_slow_reader(tmp_path, script, "40")
    fixed, _ = _doctor_into_slow_reader(tmp_path, script, "--async", "40")
    before, after = _logging_share(plain), _logging_share(fixed)
    print(f"logging share of step time: {before:.1%} plain, {after:.1%} with async_stdout")
    assert before > 0.3, before  # the pipe is full: each print waits for the reader
    assert after < before / 3, (before, after)
    line = [s for s in plain["line_samples"] if s["phase"] == "logging"]
    code = 'print(f"[{i}/{steps}] Loss_D: {loss.item():.4f} " + "." * 16000, flush=True)'
    assert line and all(s["file"].endswith("print_heavy.py") for s in line)
    snippet = logging_fix_snippet("    " + code)
    assert "+ async_stdout()" in snippet and "async_logging" not in snippet
    # the REPORT: the finding names the print line and gives the fix that works for print
    (f,) = [f for f in report["findings"] if f["check"] == "logging"]
    assert "print_heavy.py:" in f["evidence"] and "print(" in f["evidence"]
    assert "+ async_stdout()" in f["fix"] and "async_logging" not in f["fix"], f["fix"]
    assert f["share_of_step_time"] == report["phase_share"]["logging"] > 0.1

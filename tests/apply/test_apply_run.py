"""`supplyline run --apply` on planted jobs, each in a real child process."""

from __future__ import annotations

import os
import re
import signal
import textwrap

import pytest
import torch

pytestmark = pytest.mark.slow

LOADER_SPEC = "num_workers=2,prefetch_factor=4,persistent_workers"


def _losses(stdout: str) -> list[str]:
    return re.findall(r"^step \d+ loss \S+$", stdout, flags=re.M)


def test_loader_gets_the_settings_and_validation_loader_is_kept(cli, zoo_path):
    proc = cli(["run", "--apply", LOADER_SPEC, zoo_path("starved.py"), "6", "--val"])
    assert proc.returncode == 0, proc.stderr
    assert "loader num_workers=2 prefetch_factor=4 persistent_workers=True" in proc.stdout
    assert "val num_workers=0" in proc.stdout  # made after a shuffled loader: validation, untouched
    first, last = [line for line in proc.stderr.splitlines() if line.startswith("supplyline run:")]
    assert first == "supplyline run: applying num_workers=2, prefetch_factor=4, persistent_workers (DataLoaders: auto)"
    assert re.search(r"6 optimizer steps, [\d.]+ steps/s", last)
    assert "1 kept as made" in last


def test_apply_to_all_changes_the_validation_loader_too(cli, zoo_path):
    proc = cli(["run", "--apply", "num_workers=1", "--apply-to", "all", zoo_path("starved.py"), "2", "--val"])
    assert proc.returncode == 0, proc.stderr
    assert "val num_workers=1" in proc.stdout


def test_same_losses_as_the_edited_script(cli, python, zoo_path, tmp_path):
    with open(zoo_path("starved.py"), encoding="utf-8") as fh:
        source = fh.read()
    edited = source.replace("num_workers=0)", "num_workers=2, prefetch_factor=4, persistent_workers=True)", 1)
    assert edited != source
    copy = tmp_path / "starved_edited.py"
    copy.write_text(edited)
    by_hand = python(str(copy), "12")
    applied = cli(["run", "--apply", LOADER_SPEC, zoo_path("starved.py"), "12"])
    assert by_hand.returncode == 0 and applied.returncode == 0, applied.stderr
    assert len(_losses(applied.stdout)) == 12
    assert _losses(applied.stdout) == _losses(by_hand.stdout)


def test_background_writes_lose_nothing_and_keep_order(cli, python, zoo_path, tmp_path):
    plain_dir, run_dir = tmp_path / "plain", tmp_path / "run"
    plain_dir.mkdir()
    run_dir.mkdir()
    plain = python(zoo_path("writes_and_saves.py"), str(plain_dir), "40")
    proc = cli(["run", "--apply", "async_save,async_logging", zoo_path("writes_and_saves.py"), str(run_dir), "40"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout == "".join(f"print {i}\n" for i in range(40)) + "done\n"
    for name in ("logging.log", "own.log"):
        assert (run_dir / name).read_text() == (plain_dir / name).read_text()
    assert (run_dir / "logging.log").read_text().splitlines() == [f"log {i}" for i in range(40)]
    saved = torch.load(run_dir / "ckpt.pt")
    expected = torch.load(run_dir / "expected.pt")
    assert saved["step"] == 38
    assert all(torch.equal(saved["model"][k], expected[k]) for k in expected)  # the state at the call
    assert not [p for p in os.listdir(run_dir) if ".tmp" in p]
    assert "13 checkpoint(s) written in the background" in proc.stderr
    assert re.search(r"40 of them fsyncs|of them fsyncs \(\d+ more merged", proc.stderr)


@pytest.mark.parametrize(
    ("args", "code"),
    [(["3"], 0), (["3", "--exit", "3"], 3), (["5", "--raise-at", "1"], 1)],
)
def test_exit_code_and_traceback_are_the_scripts(cli, python, zoo_path, args, code):
    plain = python(zoo_path("starved.py"), *args)
    proc = cli(["run", "--apply", "num_workers=1,async_logging", zoo_path("starved.py"), *args])
    assert plain.returncode == proc.returncode == code
    assert _losses(proc.stdout) == _losses(plain.stdout)
    if code == 1:
        assert "RuntimeError: planted failure at step 1" in proc.stderr
        assert f'File "{zoo_path("starved.py")}"' in proc.stderr
        assert "supplyline/launch.py" not in proc.stderr and "runpy" not in proc.stderr


def test_a_save_that_would_fail_fails_as_without_us(cli, python, zoo_path, tmp_path):
    # Into a missing folder: made on the call, so the script gets torch's own exception at the same line.
    args = [zoo_path("writes_and_saves.py"), str(tmp_path), "4", "--bad-save"]
    plain = python(*args)
    proc = cli(["run", "--apply", "async_save", *args])
    assert plain.returncode == proc.returncode == 1
    error = plain.stderr.strip().splitlines()[-1]
    assert "no-such-dir" in error and error in proc.stderr  # the same exception, the same message
    assert "1 saved synchronously (1 because no such folder)" in proc.stderr
    assert not proc.stdout.endswith("done\n")  # the script stopped where it would have stopped


def test_prints_queued_before_sigterm_are_written(cli, tmp_path):
    script = tmp_path / "terminated.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, time
            for i in range(500):
                print(f"line {i}")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
            """
        )
    )
    proc = cli(["run", "--apply", "async_logging", str(script)])
    assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
    assert proc.stdout == "".join(f"line {i}\n" for i in range(500))


def test_auto_from_a_doctor_report(cli, zoo_path, tmp_path):
    report = tmp_path / "report.json"
    report.write_text(
        '{"report_version": 1, "findings": [{"check": "dataloader"}], "dataloader_recommended": {'
        '"num_workers": {"seen": 0, "recommended": 2}, "prefetch_factor": {"seen": null, "recommended": 4},'
        '"persistent_workers": {"seen": false, "recommended": true}, "pin_memory": {"seen": false, "recommended": false}}}'
    )
    proc = cli(["run", "--apply", "auto", "--from", str(tmp_path), zoo_path("starved.py"), "2"])
    assert proc.returncode == 0, proc.stderr
    assert "loader num_workers=2 prefetch_factor=4 persistent_workers=True" in proc.stdout
    assert f"from doctor report {report}" in proc.stderr


@pytest.mark.parametrize(
    ("apply", "message"),
    [
        ("num_workers=x", "--apply: num_workers needs a whole number"),
        ("workers=2", "--apply: unknown setting 'workers'"),
        ("num_workers=0,persistent_workers", "need num_workers of 1 or more"),
        ("auto", "--apply auto needs --from"),
    ],
)
def test_bad_spec_is_one_line(cli, zoo_path, apply, message):
    proc = cli(["run", "--apply", apply, zoo_path("starved.py"), "2"])
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert proc.stdout == ""


def test_run_with_nothing_to_apply_says_so(cli, zoo_path):
    proc = cli(["run", zoo_path("starved.py"), "2"])
    assert proc.returncode == 2 and "nothing to apply" in proc.stderr and "Traceback" not in proc.stderr

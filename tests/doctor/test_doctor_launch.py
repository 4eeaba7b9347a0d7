"""Running the target unchanged: the pyinstrument-style probe, exit codes and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def probe_output(stdout: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith("PROBE "))[6:])


@pytest.mark.slow
@pytest.mark.parametrize("form", ["script", "dashdash", "module"])
def test_probe_sees_the_same_as_under_plain_python(doctor, tmp_path, form, zoo_path):
    script = zoo_path("probe.py")
    env = {
        "PROBE_EXIT": "3",
        "PYTHONPATH": os.pathsep.join([os.path.dirname(script), os.environ.get("PYTHONPATH", "")]),
    }
    plain_cmd = (
        [sys.executable, script, "--steps", "7", "x"]
        if form != "module"
        else [sys.executable, "-m", "probe", "--steps", "7", "x"]
    )
    plain = subprocess.run(
        plain_cmd, cwd=str(tmp_path), env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    args = {
        "script": [script, "--steps", "7", "x"],
        "dashdash": ["--", "python", script, "--steps", "7", "x"],
        "module": ["-m", "probe", "--steps", "7", "x"],
    }[form]
    run = doctor(*args, env=env)
    assert plain.returncode == 3 and run.proc.returncode == 3, run.proc.stderr
    ours, theirs = probe_output(run.proc.stdout), probe_output(plain.stdout)
    if form == "module":
        # python -m puts '' or the cwd first; we put the absolute cwd, as runpy would resolve it.
        assert os.path.abspath(ours.pop("path0") or ".") == os.path.abspath(theirs.pop("path0") or str(tmp_path))
    assert ours == theirs
    assert ours["spawned"] == [0, 1, 2, 3]
    assert os.path.exists(os.path.join(run.out, "record.json"))


def test_missing_script(doctor, zoo_path):
    run = doctor("nope.py")
    assert run.proc.returncode == 2
    assert run.proc.stderr.strip() == "supplyline doctor: no such script: nope.py"


def test_syntax_error(doctor, tmp_path, zoo_path):
    bad = tmp_path / "bad.py"
    bad.write_text("for x in :\n    pass\n")
    run = doctor(str(bad))
    assert run.proc.returncode == 2
    assert "syntax error" in run.proc.stderr and "Traceback" not in run.proc.stderr
    assert len(run.proc.stderr.strip().splitlines()) == 1


def test_module_not_found(doctor, zoo_path):
    run = doctor("-m", "no_such_module_xyz")
    assert run.proc.returncode == 2
    assert "no module named 'no_such_module_xyz'" in run.proc.stderr
    assert "Traceback" not in run.proc.stderr


def test_script_without_training_loop(doctor, tmp_path, zoo_path):
    s = tmp_path / "hello.py"
    s.write_text("print('hello')\n")
    run = doctor(str(s))
    assert run.proc.returncode == 0
    assert "hello" in run.proc.stdout
    assert run.report["steps"]["observed"] == 0
    assert "No training steps were seen" in run.report["verdict"]["sentence"]


def test_script_that_forks_subprocesses(doctor, tmp_path, zoo_path):
    s = tmp_path / "forks.py"
    s.write_text(
        "import os, subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True, text=True).stdout\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('child said', out.strip())\n"
    )
    run = doctor(str(s))
    assert run.proc.returncode == 0, run.proc.stderr
    assert "child said 42" in run.proc.stdout
    assert os.path.exists(os.path.join(run.out, "report.json"))


def test_sys_exit_code_is_kept(doctor, tmp_path, zoo_path):
    s = tmp_path / "exit.py"
    s.write_text("import sys\nsys.exit(7)\n")
    run = doctor(str(s))
    assert run.proc.returncode == 7
    assert run.record["outcome"]["reason"] == "sys_exit"


def test_bad_options(doctor, zoo_path):
    assert doctor("--steps", "0", "x.py").proc.returncode == 2
    run = doctor("--seconds", "-1", "x.py")
    assert run.proc.stderr.strip() == (
        "supplyline doctor: argument --seconds: must be more than 0 seconds, not -1 (see supplyline doctor --help)"
    )


@pytest.mark.slow
def test_ctrl_c_keeps_the_report_and_exit_code(tmp_path):
    import signal
    import time

    script = tmp_path / "loop.py"
    script.write_text(
        "import torch\nfrom torch import nn\n"
        "m = nn.Linear(8, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "print('READY', flush=True)\n"
        "while True:\n    m(torch.randn(4, 8)).sum().backward(); opt.step(); opt.zero_grad()\n"
    )
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "supplyline", "doctor", "--out", str(out), str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "READY"
        time.sleep(1.0)  # let it train a little; not a timing assertion
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # a child that ignored the signal must not train on after the test
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert "KeyboardInterrupt" in err
    rec = json.loads((out / "record.json").read_text())
    assert rec["outcome"]["reason"] == "interrupted"
    assert len(rec["steps"]["duration_s"]) > 0


def test_report_write_failure_keeps_the_scripts_exit_code(tmp_path):
    """A report directory that becomes unwritable mid-run: one warning line, the script's own exit code."""
    script = tmp_path / "job.py"
    out = tmp_path / "report"
    script.write_text(
        f"import os, shutil, sys\nshutil.rmtree({str(out)!r})\nopen({str(out)!r}, 'w').close()\nsys.exit(5)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "supplyline", "doctor", "--no-what-if", "--out", str(out), str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 5
    assert "supplyline doctor: warning:" in proc.stderr and "Traceback" not in proc.stderr

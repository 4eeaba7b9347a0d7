"""`supplyline monitor` and `supplyline demo` as users run them: real child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from supplyline.collect.gpu import NO_GPU, GpuReader

_reader = GpuReader()
HAS_GPU = _reader.available
_reader.close()


def _one_clean_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert lines[0].startswith("supplyline monitor: ")
    return lines[0]


def test_command_exit_code_passes_through(cli) -> None:
    result = cli(
        ["monitor", "--interval", "0.2", "--", sys.executable, "-c", "import sys, time; time.sleep(0.6); sys.exit(3)"],
        timeout=120,
    )
    assert result.returncode == 3, result.stderr
    assert "samples over" in result.stdout and "cpu.busy_pct" in result.stdout
    assert "tree.cpu_pct" in result.stdout
    assert "Traceback" not in result.stderr
    # The GPU section says it once, in the summary, on a machine without NVML.
    assert (result.stdout + result.stderr).count(NO_GPU) == (0 if HAS_GPU else 1)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


@pytest.mark.parametrize("which", ["exited", "zero"])
def test_pid_of_no_process(cli, which) -> None:
    pid = _dead_pid() if which == "exited" else 0
    result = cli(["monitor", "--pid", str(pid)], timeout=60)
    assert result.returncode == 2
    assert f"no process with PID {pid}" in _one_clean_line(result.stderr)


def test_command_keeps_its_stdin_and_stdout(cli) -> None:
    result = cli(
        ["monitor", "--interval", "0.2", "--", sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
        input_text="fed through\n",
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "FED THROUGH" in result.stdout


def test_command_not_found(cli) -> None:
    result = cli(["monitor", "--", "no-such-command-supplyline"], timeout=60)
    assert result.returncode == 127
    assert "command not found: no-such-command-supplyline" in _one_clean_line(result.stderr)


@pytest.mark.parametrize("interval", ["0", "-1"])
def test_interval_must_be_positive(cli, interval) -> None:
    result = cli(["monitor", "--interval", interval, "--duration", "1"], timeout=60)
    assert result.returncode == 2
    assert "--interval: must be more than 0" in _one_clean_line(result.stderr)


def test_unwritable_log_fails_before_the_command_runs(cli, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    marker = tmp_path / "ran"
    result = cli(["monitor", "--log", str(blocker / "samples.jsonl"), "--", "touch", str(marker)], timeout=60)
    assert result.returncode == 2
    assert "cannot write" in _one_clean_line(result.stderr)
    assert not marker.exists()


def test_watched_pid_that_exits_ends_the_monitor_cleanly(cli, tmp_path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    try:
        result = cli(["monitor", "--interval", "0.25", "--pid", str(target.pid)], timeout=120)
    finally:
        target.wait(timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"PID {target.pid}" in result.stdout and "samples over" in result.stdout
    assert "Traceback" not in result.stderr


def test_host_mode_with_duration_writes_both_logs(cli, tmp_path) -> None:
    log, table = tmp_path / "s.jsonl", tmp_path / "s.csv"
    result = cli(
        ["monitor", "--interval", "0.25", "--duration", "1", "--log", str(log), "--csv", str(table)], timeout=120
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) >= 3
    assert all(r["processes"] == [] for r in records)  # the host alone: no tree
    assert len(table.read_text().splitlines()) == len(records) + 1
    assert "host:" in result.stdout


def test_sigint_stops_the_command_and_still_prints_the_summary(tmp_path) -> None:
    log = tmp_path / "s.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "supplyline", "monitor", "--interval", "0.2", "--log", str(log), "--", "sleep", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None and "watching" in proc.stderr.readline()
        while not log.exists() or not log.read_text().strip():
            time.sleep(0.05)
        sleeper = next(p for p in psutil.Process(proc.pid).children() if p.name() == "sleep")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT  # the command's own end: killed by the forwarded SIGINT
    assert "samples over" in out and "Traceback" not in err
    assert not psutil.pid_exists(sleeper.pid) or sleeper.status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_demo_runs_the_bundled_job_under_the_monitor(cli) -> None:
    result = cli(["demo", "--monitor", "--seconds", "2", "--interval", "0.25"], timeout=300)
    assert result.returncode == 0, result.stderr
    assert "demo_train:" in result.stdout and "steps in" in result.stdout
    assert "tree.children_cpu_pct" in result.stdout
    assert (result.stdout + result.stderr).count(NO_GPU) == (0 if HAS_GPU else 1)


def test_bundled_demo_script_is_in_the_package() -> None:
    from supplyline.commands.demo import BUNDLED_DEMO

    assert os.path.isfile(BUNDLED_DEMO) and BUNDLED_DEMO.endswith("demo_train.py")


def test_sigint_in_host_mode_prints_the_summary_and_exits_0(tmp_path) -> None:
    log = tmp_path / "s.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "supplyline", "monitor", "--interval", "0.2", "--log", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not log.exists() or len(log.read_text().splitlines()) < 2:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "host:" in out and "samples over" in out and "Traceback" not in err

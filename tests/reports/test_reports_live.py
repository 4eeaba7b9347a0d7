"""`supplyline doctor --live`: the panel refreshes on stderr and the script's own lines arrive whole."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import pytest
from reports_helpers import child_env, zoo
from rich.console import Console

from supplyline.collect.steps import StepClock
from supplyline.record import RunRecord
from supplyline.render.live import LiveView, latest_sample, panel, recent_steps

PAYLOAD = "abcdefghijklmnopqrstuvwxyz0123456789" * 4


def run_in_pty(args: list[str], cwd: str, columns: int = 80, timeout: float = 300) -> tuple[int, str]:
    """Run a command with stdin/stdout/stderr on one pseudo-terminal, as in an interactive shell."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    env = {**child_env(), "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "30"}
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return rc, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_live_panel_keeps_every_printed_line_whole(tmp_path) -> None:
    out = str(tmp_path / "report")
    rc, screen = run_in_pty(
        [
            sys.executable,
            "-m",
            "supplyline",
            "doctor",
            "--live",
            "--steps",
            "25",
            "--what-if-steps",
            "5",
            "--out",
            out,
            zoo("chatty.py"),
            "0.002",
        ],
        cwd=str(tmp_path),
    )
    assert rc == 0, screen[-3000:]
    assert "supplyline doctor ▸ chatty.py" in screen  # the panel was drawn
    assert "\x1b[1A" in screen or "\x1b[2K" in screen  # ... and redrawn in place
    # Each stdout line starts on a fresh line (after a newline or the panel's erase) and ends with one.
    whole = re.findall(r"(?:\n|\x1b\[2K)LINE (\d{4}) loss=[0-9.]+ ([a-z0-9]+) END\r\n", screen)
    numbers = [int(n) for n, _ in whole]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 25, numbers
    assert all(p == PAYLOAD for _, p in whole)  # longer than the terminal, never re-wrapped or cut
    assert len(re.findall(r"LINE \d{4}", screen)) == len(numbers)  # no line appears cut or twice
    warns = re.findall(r"(?:\n|\x1b\[2K)WARN (\d{4}) ([a-z0-9]+) END\r\n", screen)
    assert [int(n) for n, _ in warns] == list(range(0, 5 * len(warns), 5)) and len(warns) >= 5
    assert "Verdict:" in screen and os.path.exists(os.path.join(out, "report.html"))


def test_live_needs_a_terminal() -> None:
    view = LiveView("x", StepClock(), lambda: None)
    if sys.stderr.isatty():
        pytest.skip("stderr is a terminal here")
    assert view.start() is False and view.live is None


def _text(renderable) -> str:
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text()


def test_panel_shows_rate_phases_workers_disk_gpu(monitored_record: RunRecord) -> None:
    clock = StepClock()
    for k, v in monitored_record.steps.items():
        clock.steps[k].extend(v)
    sample = latest_sample(type("M", (), {"samples": monitored_record.monitor.samples})())
    steps = recent_steps(clock, 10)
    assert len(steps["duration_s"]) == 10 and steps["count"] == [float(len(monitored_record.steps["whatif"]))]
    text = _text(panel("train.py", steps, sample, 12.5))
    rate = 10 / sum(monitored_record.steps["duration_s"][-10:])
    assert f"{rate:.1f} steps/s" in text
    assert "model+code" in text
    assert "2 workers: 60 70 (% of a core)" in text and "trainer 95%" in text
    assert "nvme0n1 r" in text and "util" in text
    assert "GPU 0: " in text


def test_panel_without_steps_or_monitor() -> None:
    text = _text(panel("train.py", recent_steps(StepClock(), 20), None, 0.4))
    assert "waiting for the first training step" in text and "not available" in text


def test_proxy_passes_whole_lines_to_their_own_stream(monkeypatch) -> None:
    import io

    from rich.text import Text

    from supplyline.render.inplace import ERASE_LINE, TerminalPanel

    term, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(sys, "stdout", out)
    screen = TerminalPanel(lambda: Text("PANEL-A\nPANEL-B"), term, refresh_s=3600)
    screen.start(redirect_stdout=True)
    try:
        print("abc", end="")
        assert out.getvalue() == ""  # a partial line waits for its newline
        print("def")
        print("warn", file=sys.stderr)
    finally:
        screen.stop()
    assert out.getvalue() == "abcdef\n"  # stdout's lines stay on stdout, whole
    screen_text = term.getvalue()
    assert "warn\n" in screen_text and screen_text.count("PANEL-A") == 3  # first draw + a redraw per line
    assert screen_text.endswith(ERASE_LINE + "\x1b[1A" + ERASE_LINE)  # transient: erased at the end
    assert sys.stdout is out and sys.stderr is term  # restored

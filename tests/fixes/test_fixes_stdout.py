"""async_stdout(): print off the training thread, order kept, nothing lost on exit, SIGTERM or Ctrl-C.

The children print far more than a pipe holds (1.1 MB against 64 KiB) while their reader, a real
separate process, has not started reading: they finish printing only because the writes are queued.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest
from fixes_helpers import child_env, write_script

from supplyline.fixes.stdout_queue import AsyncStdout

LINES = 10_000

CHILD = f"""
import os, signal, sys, time
from supplyline.fixes import async_stdout

mode, marker, go = sys.argv[1], sys.argv[2], sys.argv[3]
async_stdout()
for i in range({LINES}):
    print(f"line {{i}} " + "x" * 100)
    if i % 1000 == 0:
        print(f"err {{i}}", file=sys.stderr, flush=True)
open(marker, "w").close()  # every line is printed (queued) before the reader reads a byte
if mode == "exit":
    while not os.path.exists(go):
        time.sleep(0.01)
    print("the end")
else:
    while True:  # until SIGTERM / SIGINT
        time.sleep(0.05)
"""

SLOW_READER = """
import os, sys, time
start, out = sys.argv[1], sys.argv[2]
while not os.path.exists(start):
    time.sleep(0.01)
with open(out, "wb") as fh:
    while True:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        fh.write(chunk)
        time.sleep(0.001)  # a reader slower than the writer: a terminal, tee, a log collector
"""


def _wait_for(path: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120  # a hang guard, not an assertion on time
    while not os.path.exists(path):
        assert proc.poll() is None, f"{what} ended early with {proc.returncode}"
        assert time.monotonic() < deadline, f"{what} never got there (blocked on the full pipe?)"
        time.sleep(0.01)


def _run(tmp_path, mode: str) -> tuple[int, list[str]]:
    script = write_script(str(tmp_path), CHILD)
    reader_script = write_script(str(tmp_path), SLOW_READER, "reader.py")
    marker, go, start, out = (str(tmp_path / n) for n in ("printed", "go", "start", "out.txt"))
    reader = subprocess.Popen([sys.executable, reader_script, start, out], stdin=subprocess.PIPE)
    child = subprocess.Popen(
        [sys.executable, script, mode, marker, go], env=child_env(), stdout=reader.stdin, stderr=subprocess.STDOUT
    )
    reader.stdin.close()  # the child holds the only write end now
    try:
        _wait_for(marker, child, "the child")
        if mode == "sigterm":
            child.send_signal(signal.SIGTERM)
        elif mode == "sigint":
            child.send_signal(signal.SIGINT)
        else:
            open(go, "w").close()
        open(start, "w").close()
        rc = child.wait(timeout=120)
        reader.wait(timeout=120)
    finally:
        for p in (child, reader):
            if p.poll() is None:
                p.kill()
    with open(out, encoding="utf-8") as fh:
        return rc, fh.read().splitlines()


def _assert_all_in_order(lines: list[str]) -> None:
    printed = [line for line in lines if line.startswith("line ")]
    assert [int(line.split()[1]) for line in printed] == list(range(LINES))
    # stdout and stderr share the pipe: their interleaving is the order they were written in
    errs = [i for i, line in enumerate(lines) if line.startswith("err ")]
    assert len(errs) == LINES // 1000
    for k, pos in enumerate(errs):
        assert lines[pos - 1] == f"line {k * 1000} " + "x" * 100


@pytest.mark.slow
def test_normal_exit_writes_everything_in_order(tmp_path):
    rc, lines = _run(tmp_path, "exit")
    assert rc == 0
    _assert_all_in_order(lines)
    assert lines[-1] == "the end"


@pytest.mark.slow
def test_sigterm_writes_everything_queued_then_ends_by_sigterm(tmp_path):
    rc, lines = _run(tmp_path, "sigterm")
    assert rc == -signal.SIGTERM
    _assert_all_in_order(lines)


@pytest.mark.slow
def test_ctrl_c_writes_everything_queued_and_the_traceback(tmp_path):
    rc, lines = _run(tmp_path, "sigint")
    assert rc == -signal.SIGINT  # Python ends an uncaught KeyboardInterrupt by SIGINT, as a shell expects
    _assert_all_in_order(lines)
    assert lines[-1] == "KeyboardInterrupt"


def _started(out: io.StringIO, err: io.StringIO) -> AsyncStdout:
    handle = AsyncStdout(out, err)  # not start(): the test's own sys.stdout stays pytest's
    handle._thread.start()
    return handle


def test_writes_keep_their_order_across_both_streams_and_flush_does_not_block():
    out, err = io.StringIO(), io.StringIO()
    handle = _started(out, err)
    stdout, stderr = handle.streams
    for i in range(500):
        stdout.write(f"{i}\n")
        stdout.flush()  # print(..., flush=True): returns at once, the writer flushes
        if i % 100 == 0:
            stderr.write(f"e{i}\n")
    handle.stop()
    assert out.getvalue().split() == [str(i) for i in range(500)]
    assert err.getvalue().split() == [f"e{i}" for i in range(0, 500, 100)]
    assert stdout.write("after\n") == 6 and out.getvalue().endswith("after\n")  # stopped: written directly


def test_stream_attributes_are_the_originals():
    out = io.StringIO()
    handle = _started(out, io.StringIO())
    try:
        assert handle.streams[0].getvalue is not None and handle.streams[0].closed is False
        with pytest.raises(TypeError):
            handle.streams[0].write(b"bytes")
    finally:
        handle.stop()


def test_async_logging_without_handlers_falls_back_to_async_stdout(tmp_path):
    script = write_script(
        str(tmp_path),
        """
        import sys
        from supplyline.fixes import async_logging
        handle = async_logging()
        print(type(sys.stdout).__name__, handle.running)
        """,
    )
    proc = subprocess.run([sys.executable, script], env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "_QueuedStream False"
    assert "no handlers, so there is no logging to move" in proc.stderr and "async_stdout()" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

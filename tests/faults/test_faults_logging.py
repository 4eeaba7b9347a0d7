"""async_logging under faults: stop() while other threads log, SIGTERM while they log, and the
exit while they log. Nothing queued is lost and the logger is never left without handlers."""

from __future__ import annotations

import os
import signal

from faults_helpers import run_script, start_script, wait_for, write_script

THREADS, PER_THREAD = 8, 4000

CHILD = """
import logging, os, sys, threading, time
from supplyline.fixes import async_logging

mode, path = sys.argv[1], sys.argv[2]
threads, per_thread = int(sys.argv[3]), int(sys.argv[4])
logging.basicConfig(level=logging.INFO, handlers=[logging.FileHandler(path)], format="%(message)s")
handle = async_logging()
go = threading.Event()

def work(t):
    go.wait()
    for i in range(per_thread):
        logging.info("t%d %d", t, i)  # module-level: with no root handler it would call basicConfig()

pool = [threading.Thread(target=work, args=(t,), daemon=(mode == "sigterm")) for t in range(threads)]
for th in pool:
    th.start()
go.set()
if mode == "stop":
    time.sleep(0.005)
    handle.stop()  # while the threads still log
    for th in pool:
        th.join()
    print("HANDLERS", [type(h).__name__ for h in logging.getLogger().handlers], flush=True)
elif mode == "sigterm":
    print("READY", flush=True)
    time.sleep(120)
# mode "exit": the script ends while the threads still log; they are joined before exit clean-up
"""


def _per_thread(path: str) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            thread, index = line.split()
            seen.setdefault(int(thread[1:]), []).append(int(index))
    return seen


def test_stop_while_eight_threads_log_loses_nothing_and_adds_no_handler(tmp_path):
    script = write_script(str(tmp_path), CHILD)
    log = str(tmp_path / "train.log")
    done = run_script(script, "stop", log, str(THREADS), str(PER_THREAD))
    assert done.returncode == 0, done.stderr
    assert "HANDLERS ['FileHandler']" in done.stdout  # no stray StreamHandler from basicConfig()
    assert done.stderr == ""  # nothing went to a stray stderr handler either
    seen = _per_thread(log)
    assert {t: sorted(v) for t, v in seen.items()} == {t: list(range(PER_THREAD)) for t in range(THREADS)}


def test_exit_while_threads_log_loses_nothing(tmp_path):
    script = write_script(str(tmp_path), CHILD)
    log = str(tmp_path / "train.log")
    done = run_script(script, "exit", log, str(THREADS), str(PER_THREAD))
    assert done.returncode == 0, done.stderr
    assert sum(len(v) for v in _per_thread(log).values()) == THREADS * PER_THREAD


def test_sigterm_while_threads_log_leaves_no_gap(tmp_path):
    script = write_script(str(tmp_path), CHILD)
    log = str(tmp_path / "train.log")
    proc = start_script(script, "sigterm", log, "4", "200000")
    wait_for(lambda: "READY" in proc.stdout.readline(), "the child to start logging")
    wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 10_000, "records on disk")
    os.kill(proc.pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    # Each thread logs in order: a lost record shows as a gap in its sequence.
    for thread, indices in _per_thread(log).items():
        assert sorted(indices) == list(range(len(indices))), f"thread {thread} lost records"

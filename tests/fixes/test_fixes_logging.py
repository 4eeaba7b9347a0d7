"""async_logging: the training thread only enqueues, and no queued line is lost on any ending."""

from __future__ import annotations

import logging
import signal
import threading
from logging.handlers import QueueHandler

import pytest
from fixes_helpers import read_until, run_child, start_child, write_script

from supplyline.fixes import async_logging

N_RECORDS = 400

# A log file on a slow disk: every record is flushed and fsync'ed, plus a pause standing in for
# a congested device, so that a backlog is still queued when the child ends.
CHILD = """
import logging, os, signal, sys, time
from supplyline.fixes import async_logging

mode, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

class SlowDiskHandler(logging.FileHandler):
    def emit(self, record):
        super().emit(record)
        self.flush()
        os.fsync(self.stream.fileno())
        time.sleep(0.002)

if mode == "sigterm-chained":
    def previous(signum, frame):
        print("previous handler ran", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, previous)

logging.basicConfig(level=logging.INFO, handlers=[SlowDiskHandler(path)], format="%(message)s")
handle = async_logging()
for i in range(n):
    logging.info("record %d", i)
print(f"BACKLOG {handle.queue.qsize()}", flush=True)
if mode == "exception":
    raise RuntimeError("training crashed")
if mode.startswith("sigterm"):
    time.sleep(120)
"""


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()


def _assert_all_written(path: str, backlog_line: str) -> None:
    # The ending happened with records still queued, so a missing flush would lose them.
    assert int(backlog_line.split()[1]) > 0, "test set-up: nothing was queued at the ending"
    assert _lines(path) == [f"record {i}" for i in range(N_RECORDS)]


@pytest.mark.slow
@pytest.mark.parametrize("mode, expected_rc", [("normal", 0), ("exception", 1)])
def test_no_line_lost_on_exit_and_on_exception(scratch, mode, expected_rc):
    script = write_script(scratch, CHILD)
    log_path = f"{scratch}/train.log"
    done = run_child(script, mode, log_path, str(N_RECORDS))
    assert done.returncode == expected_rc, done.stderr
    if mode == "exception":
        assert "training crashed" in done.stderr
    _assert_all_written(log_path, read_backlog(done.stdout))


def read_backlog(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("BACKLOG"))


@pytest.mark.slow
def test_no_line_lost_on_sigterm_and_dies_by_sigterm(scratch):
    script = write_script(scratch, CHILD)
    log_path = f"{scratch}/train.log"
    proc = start_child(script, "sigterm", log_path, str(N_RECORDS))
    backlog = read_until(proc, "BACKLOG")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # the conventional status (143 in a shell)
    _assert_all_written(log_path, backlog)


@pytest.mark.slow
def test_sigterm_chains_the_previous_handler(scratch):
    script = write_script(scratch, CHILD)
    log_path = f"{scratch}/train.log"
    proc = start_child(script, "sigterm-chained", log_path, str(N_RECORDS))
    backlog = read_until(proc, "BACKLOG")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "previous handler ran" in out
    _assert_all_written(log_path, backlog)


class _ThreadRecordingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.threads.append(threading.current_thread().name)
        self.messages.append(record.getMessage())


def _queue_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers if isinstance(h, QueueHandler)]


@pytest.fixture
def private_logger():
    logger = logging.getLogger(f"supplyline-test-{id(object())}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger
    logger.handlers.clear()


def test_training_thread_only_enqueues(private_logger):
    recorder = _ThreadRecordingHandler()
    private_logger.addHandler(recorder)
    with async_logging(private_logger) as handle:
        for i in range(50):
            private_logger.info("message %d", i)
        # (pytest's own capture handlers may sit on the logger too; they move along.)
        assert _queue_handlers(private_logger) == [handle.queue_handler]
        assert recorder not in private_logger.handlers
    assert recorder.messages == [f"message {i}" for i in range(50)]
    assert threading.main_thread().name not in recorder.threads
    assert len(set(recorder.threads)) == 1  # one listener thread did all the I/O
    # stop() puts the original handlers back: logging keeps working, synchronously.
    assert recorder in private_logger.handlers
    assert not _queue_handlers(private_logger)


def test_idempotent_and_stop_twice(private_logger):
    private_logger.addHandler(_ThreadRecordingHandler())
    first = async_logging(private_logger)
    second = async_logging(private_logger.name)
    assert first is second
    assert len(_queue_handlers(private_logger)) == 1
    first.stop()
    first.stop()
    assert not first.running


def test_handler_levels_still_apply(private_logger):
    quiet = _ThreadRecordingHandler()
    quiet.setLevel(logging.WARNING)
    private_logger.addHandler(quiet)
    with async_logging(private_logger):
        private_logger.info("dropped")
        private_logger.warning("kept")
    assert quiet.messages == ["kept"]


# A logger without handlers falls back to async_stdout(): tested in a child process in test_fixes_stdout.py.

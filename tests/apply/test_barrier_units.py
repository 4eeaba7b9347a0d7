"""The read-your-writes barrier in-process: a background save held open by a gate, then each idiom
of real training code touches the path and must see the finished file (or the failure, as a
synchronous save would have raised it)."""

from __future__ import annotations

import builtins
import errno
import glob
import io
import os
import pathlib
import posix
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from supplyline.apply import checkpoint as ckpt
from supplyline.apply.checkpoint import BackgroundSaves
from supplyline.fixes import _barrier

STATE = {"w": torch.arange(1024, dtype=torch.float32)}
REAL_SAVE = torch.save  # taken before any test patches it


class Gate:
    """An original torch.save that writes only once ``open()`` is called, so the save is surely pending."""

    def __init__(self, real: Callable[..., Any], error: BaseException | None = None) -> None:
        self.real, self.error = real, error
        self.event = threading.Event()

    def __call__(self, obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        assert self.event.wait(60), "the gate was never opened"
        if self.error is not None:
            raise self.error
        self.real(obj, f, *args, **kwargs)

    def open_soon(self) -> None:
        threading.Timer(0.05, self.event.set).start()


@pytest.fixture
def saves(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[BackgroundSaves, Gate]]:
    gate = Gate(torch.save)
    monkeypatch.setattr(torch, "save", gate)  # BackgroundSaves wraps whatever torch.save is at install
    saver = BackgroundSaves().install()
    try:
        yield saver, gate
    finally:
        gate.event.set()
        saver.finish()


def pending_save(saver: BackgroundSaves, gate: Gate, path: str) -> None:
    torch.save(STATE, path)
    assert saver.saves == 1 and os.path.abspath(path) in _barrier._writes  # returned before the write
    gate.open_soon()


def plain_bytes(tmp: pathlib.Path) -> bytes:
    """What a synchronous save of STATE to a file named ckpt.pt holds (in a folder nothing waits on)."""
    other = tmp / "plain"
    other.mkdir(exist_ok=True)
    REAL_SAVE(STATE, str(other / "ckpt.pt"))
    return (other / "ckpt.pt").read_bytes()


def atomic_replace(d: str, path: str) -> str:
    os.replace(path, os.path.join(d, "last.pt"))
    return os.path.join(d, "last.pt")


def rotation(d: str, path: str) -> str:
    found = glob.glob(os.path.join(d, "*.pt"))
    assert found == [path]
    return path


def child_copy(d: str, path: str) -> str:
    subprocess.run(["cp", path, os.path.join(d, "up.pt")], check=True)
    return os.path.join(d, "up.pt")


IDIOMS: dict[str, Callable[[str, str], str]] = {
    "os.replace (timm)": atomic_replace,
    "os.rename": lambda d, p: (os.rename(p, os.path.join(d, "r.pt")), os.path.join(d, "r.pt"))[1],
    "os.path.getsize": lambda d, p: (os.path.getsize(p) > 0 or p) and p,
    "os.path.exists": lambda d, p: (os.path.exists(p) or "") and p,
    "glob rotation": rotation,
    "os.listdir": lambda d, p: (os.listdir(d) == ["ckpt.pt"] or "") and p,
    "os.scandir": lambda d, p: ([e.name for e in os.scandir(d)] == ["ckpt.pt"] or "") and p,
    "shutil.copy": lambda d, p: shutil.copy(p, os.path.join(d, "best.pt")),
    "pathlib read_bytes": lambda d, p: (len(pathlib.Path(p).read_bytes()) > 0 or "") and p,
    "subprocess cp": child_copy,
    "os.system": lambda d, p: (os.system(f"cp {p} {d}/sys.pt") == 0 or "") and os.path.join(d, "sys.pt"),
    "torch.load": lambda d, p: (torch.equal(torch.load(p)["w"], STATE["w"]) or "") and p,
}


@pytest.mark.parametrize("idiom", list(IDIOMS))
def test_each_idiom_sees_the_whole_file_at_once(saves, tmp_path, idiom):
    saver, gate = saves
    d = tmp_path / "ckpt"
    d.mkdir()
    path = str(d / "ckpt.pt")
    pending_save(saver, gate, path)
    result = IDIOMS[idiom](str(d), path)
    assert result, f"{idiom} did not see the file"
    assert pathlib.Path(result).read_bytes() == plain_bytes(tmp_path)  # byte-identical to a synchronous save
    assert not [n for n in os.listdir(d) if n.startswith(ckpt.STAGING_PREFIX)]


def test_unrelated_paths_do_not_wait(saves, tmp_path):
    saver, gate = saves
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "data").mkdir()
    pending_save(saver, gate, str(tmp_path / "ckpt" / "ckpt.pt"))
    gate.event.clear()  # the timer may not have fired yet: hold the write again
    assert os.listdir(tmp_path / "data") == []  # a sibling folder does not wait for the write...
    assert os.path.abspath(tmp_path / "ckpt" / "ckpt.pt") in _barrier._writes  # ...which is still pending
    gate.event.set()


@pytest.mark.parametrize(
    "error, check",
    [
        (OSError(errno.ENOSPC, "No space left on device", "/elsewhere/tmp"), "errno"),
        (RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"), "message"),
    ],
)
def test_a_failed_write_is_raised_where_the_script_touches_the_path(monkeypatch, tmp_path, error, check):
    gate = Gate(torch.save, error)
    monkeypatch.setattr(torch, "save", gate)
    saver = BackgroundSaves().install()
    path = str(tmp_path / "ckpt.pt")
    try:
        torch.save(STATE, path)
        gate.open_soon()
        with pytest.raises(type(error)) as raised:
            os.path.getsize(path)
        if check == "errno":
            assert raised.value.errno == errno.ENOSPC and raised.value.filename == path  # the script's path
        else:
            assert path in str(raised.value) and "failed writing" in str(raised.value)
        assert not _barrier._writes  # raised once: the next touch goes through
        assert saver.finish() is None  # the script saw it: nothing left to report
    finally:
        gate.event.set()
        saver.finish()


def test_a_failed_write_nobody_touched_is_reported_by_finish(monkeypatch, tmp_path):
    gate = Gate(torch.save, RuntimeError("file write failed"))
    monkeypatch.setattr(torch, "save", gate)
    saver = BackgroundSaves().install()
    gate.event.set()
    torch.save(STATE, str(tmp_path / "ckpt.pt"))
    reason = saver.finish()
    assert reason is not None and str(tmp_path / "ckpt.pt") in reason and "failed in the background" in reason


def test_the_next_save_raises_an_earlier_failure(monkeypatch, tmp_path):
    gate = Gate(torch.save, RuntimeError("file write failed"))
    monkeypatch.setattr(torch, "save", gate)
    saver = BackgroundSaves().install()
    gate.event.set()
    try:
        torch.save(STATE, str(tmp_path / "a.pt"))
        with pytest.raises(RuntimeError, match=r"a\.pt"):
            torch.save(STATE, str(tmp_path / "b.pt"))
    finally:
        saver.finish()


def test_the_patches_come_off(tmp_path):
    saver = BackgroundSaves().install()
    assert os.stat is not posix.stat and builtins.open is not io.FileIO  # installed
    saver.finish()
    assert os.stat is posix.stat and os.replace is posix.replace and os.listdir is posix.listdir
    assert builtins.open is io.open and not _barrier._writes


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda t: str(t / "missing" / "c.pt"), "no such folder"),
        (lambda t: (t / "folder").mkdir() or str(t / "folder"), "the path is a folder"),
    ],
)
def test_a_save_that_would_fail_is_made_on_the_call(tmp_path, make, reason):
    assert ckpt.refusal(make(tmp_path), 1024) == reason


def test_a_save_that_may_not_fit_is_made_on_the_call(tmp_path, monkeypatch):
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert ckpt.refusal(str(tmp_path / "c.pt"), 1024) is None
    assert ckpt.refusal(str(tmp_path / "c.pt"), free) == "too little free space for a second copy"


def test_os_exit_waits_for_the_write_and_fails_if_it_failed(tmp_path):
    # The barrier alone, without torch: a write that fails after os._exit(0) was called.
    script = tmp_path / "exit.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, threading, time
            from supplyline.fixes import _barrier
            _barrier.acquire()
            write = _barrier.begin({str(tmp_path / "c.pt")!r})
            def writer():
                _barrier.mark_writer_thread()
                time.sleep(0.2)
                _barrier.end(write, OSError(28, "No space left on device"), "torch.save to c.pt failed")
            threading.Thread(target=writer).start()
            os._exit(0)
            """
        )
    )
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "torch.save to c.pt failed" in done.stderr


def test_a_distributed_checkpoint_folder_is_waited_for_by_the_saving_thread(tmp_path):
    import warnings

    import torch.distributed.checkpoint as dcp

    saver = BackgroundSaves().install()
    folder = tmp_path / "step-1"
    state = {"w": torch.randn(2_000_000)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "torch.distributed is disabled ... a single process"
            dcp.save(state, checkpoint_id=str(folder))
            assert saver._dcp_write is not None and saver._dcp_write.path == str(folder)  # the folder is pending
            assert ".metadata" in os.listdir(folder)  # a listing right after the save sees it whole
            back = {"w": torch.zeros(2_000_000)}
            dcp.load(back, checkpoint_id=str(folder))
        assert torch.equal(back["w"], state["w"])
    finally:
        assert saver.finish() is None
    assert saver.saves == 1 and not _barrier._writes

"""``%%supplyline`` and ``supplyline.watch()`` in a real notebook, executed by a real Jupyter kernel.

The notebook is built with nbformat and run with nbclient against an ipykernel started from this
interpreter (a kernel spec written in a temporary JUPYTER_PATH), once for the module: the
assertions read the outputs the kernel sent back, as a notebook front end would show them.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

KERNEL = "supplyline-test-python"

SETUP = '''
import signal, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)  # a crowded 2-core machine: no OpenMP threads spinning against the loader


class PythonPrep(Dataset):
    """Per-sample CPU work in Python, loaded with num_workers=0: the trainer waits on it."""

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        x = [0.0] * 64
        t = time.perf_counter()
        while time.perf_counter() - t < 0.001:
            for k in range(64):
                x[k] = x[k] * 0.5 + k
        return torch.tensor(x), i % 10


def train(loader, model, opt, limit=None):
    global steps_done
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps_done = i + 1
        if limit is not None and i + 1 == limit:
            raise ValueError("planted failure in the cell")


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
handlers_before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
'''

STARVED = """%%supplyline --steps 20 --try-steps 20 --out {out}
steps_done = 0
train(DataLoader(PythonPrep(), batch_size=16, num_workers=0), model, opt)
"""

RAISES = """%%supplyline --steps 50 --no-what-if --no-try --out {out}
train(DataLoader(PythonPrep(), batch_size=16, num_workers=0), model, opt, limit=4)
"""

ALIVE = """handlers_after = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
print("alive", steps_done, handlers_after == handlers_before)
"""

WATCH = """import supplyline
with supplyline.watch(out={out!r}, steps=10, what_if=False) as run:
    train(DataLoader(PythonPrep(), batch_size=16, num_workers=0), model, opt)
print("after the block", steps_done)
run
"""

# The report folder turns into a file while the cell runs: writing the report fails, the cell does not.
DISK_FAILS = """%%supplyline --steps 5 --no-what-if --no-try --out {out}
import shutil
shutil.rmtree({out!r})
open({out!r}, "w").close()
train(DataLoader(PythonPrep(), batch_size=16, num_workers=0), model, opt)
"""

# No limit: the training runs until the front end interrupts the kernel (the notebook's stop button).
INTERRUPTED = """%%supplyline --out {out}
train(DataLoader(PythonPrep(), batch_size=16, num_workers=0), model, opt)
"""
INTERRUPT_AFTER_S = 8  # when nbclient interrupts that cell; the other cells have the hang guard only
HANG_GUARD_S = 600

AFTER_DISK = "print('still here', steps_done)\n"

BAD_OPTION = "%%supplyline --steps 0\nprint('never runs')\n"


def _kernel_spec(root: Path) -> None:
    """A kernel spec that starts ipykernel with this very interpreter (the test venv's python)."""
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"}))


def _cell_timeout(cell: Any) -> int:
    """The cell tagged ``interrupt`` is stopped as the stop button would; the others' timeout guards hangs only."""
    return INTERRUPT_AFTER_S if "interrupt" in cell.metadata.get("tags", []) else HANG_GUARD_S


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("notebook")
    _kernel_spec(root / "jupyter")
    out = {name: root / name for name in ("starved", "raises", "watched", "disk", "interrupted")}
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext supplyline"),
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(STARVED.format(out=out["starved"])),
        nbformat.v4.new_code_cell(RAISES.format(out=out["raises"])),
        nbformat.v4.new_code_cell(ALIVE),
        nbformat.v4.new_code_cell(WATCH.format(out=str(out["watched"]))),
        nbformat.v4.new_code_cell(DISK_FAILS.format(out=str(out["disk"]))),
        nbformat.v4.new_code_cell(AFTER_DISK),
        nbformat.v4.new_code_cell(INTERRUPTED.format(out=out["interrupted"]), metadata={"tags": ["interrupt"]}),
        nbformat.v4.new_code_cell(ALIVE),
        nbformat.v4.new_code_cell(BAD_OPTION),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root / "jupyter"))
        # allow_errors: the planted failures must not stop the run.
        client = NotebookClient(
            nb,
            kernel_name=KERNEL,
            timeout_func=_cell_timeout,
            interrupt_on_timeout=True,
            allow_errors=True,
            resources={"metadata": {"path": str(root)}},
        )
        client.execute()
    names = ["load", "setup", "starved", "raises", "alive", "watched", "disk", "after_disk", "interrupted"]
    names += ["alive_after_interrupt", "bad_option"]
    return {"cells": dict(zip(names, nb.cells)), "out": out}


def _outputs(cell: Any, kind: str) -> list[Any]:
    return [o for o in cell.outputs if o.output_type == kind]


def _stream(cell: Any) -> str:
    return "".join(o.text for o in _outputs(cell, "stream"))


def _frame_page(markup: str) -> str:
    """The page inside the iframe's srcdoc, unescaped as the browser reads it."""
    found = re.search(r'srcdoc="([^"]*)"', markup)
    assert found, markup[:300]
    return html.unescape(found.group(1))


def test_the_starved_cell_shows_the_doctors_verdict_inline(executed: dict[str, Any]) -> None:
    cell, out = executed["cells"]["starved"], executed["out"]["starved"]
    assert not _outputs(cell, "error"), _outputs(cell, "error")
    (result,) = _outputs(cell, "execute_result")
    report = json.loads((out / "report.json").read_text())
    verdict = report["verdict"]
    assert verdict["bound"] == "input"  # what `supplyline doctor` says of this job (tests/doctor: prep_workers0)
    # The inline page is report.html, byte for byte.
    page = _frame_page(result.data["text/html"])
    assert page == (out / "report.html").read_text()
    assert f"<strong>input</strong> — {html.escape(verdict['sentence'], quote=True)}" in page
    # The text repr: the verdict word, and the fix naming num_workers.
    text = result.data["text/plain"]
    assert text.startswith("supplyline (stopped after 20 steps): INPUT — ")
    top = report["findings"][0]
    assert top["check"] == "dataloader" and "num_workers=" in top["fix"]
    assert "fix (dataloader):" in text and "num_workers=" in text
    # The doctor's what-if phases and fix trial ran inside the kernel, the trial's workers forked from it.
    assert report["whatif"]["ran"] is True
    assert report["trials"] and "num_workers" in report["trials"][0]["settings"]
    record = json.loads((out / "record.json").read_text())
    assert record["target"]["kind"] == "library"
    assert "ipykernel" not in record["target"]["name"]  # not the kernel launcher's sys.argv
    assert "[cell " in record["target"]["name"]


def test_a_cell_that_raises_shows_its_own_exception_and_the_kernel_survives(executed: dict[str, Any]) -> None:
    cell = executed["cells"]["raises"]
    (error,) = _outputs(cell, "error")
    assert error.ename == "ValueError" and error.evalue == "planted failure in the cell"
    assert any("train(" in line for line in error.traceback)  # the cell's own line is in the traceback
    report = json.loads((executed["out"]["raises"] / "report.json").read_text())
    assert report["outcome"]["reason"] == "exception"
    assert report["outcome"]["exception_type"] == "ValueError"
    alive = executed["cells"]["alive"]
    assert not _outputs(alive, "error")
    # The kernel went on: steps_done is the raising cell's (4 steps), and no signal handler was left changed.
    assert _stream(alive).strip() == "alive 4 True"


def test_watch_works_in_a_kernel_and_displays_inline(executed: dict[str, Any]) -> None:
    cell, out = executed["cells"]["watched"], executed["out"]["watched"]
    assert not _outputs(cell, "error"), _outputs(cell, "error")
    # Shown once as the block ends (no terminal summary in the cell), then again as the cell's value.
    (shown,) = _outputs(cell, "display_data")
    (result,) = _outputs(cell, "execute_result")
    page = (out / "report.html").read_text()
    assert _frame_page(shown.data["text/html"]) == page == _frame_page(result.data["text/html"])
    assert "after the block 10" in _stream(cell)  # the block ended at its limit, the cell went on
    assert "Verdict:" not in _stream(cell)
    record = json.loads((out / "record.json").read_text())
    assert record["outcome"]["reason"] == "stopped"
    assert len(record["steps"]["duration_s"]) == 10


def test_a_report_that_cannot_be_written_is_a_warning_and_still_shows_inline(executed: dict[str, Any]) -> None:
    cell, out = executed["cells"]["disk"], executed["out"]["disk"]
    assert not _outputs(cell, "error"), _outputs(cell, "error")
    assert out.is_file()  # what the cell made of the folder is left alone
    warning = [line for line in _stream(cell).splitlines() if "warning" in line]
    assert len(warning) == 1 and f"could not write to {out}" in warning[0]
    (result,) = _outputs(cell, "execute_result")  # the report needs no disk to be shown
    assert "<strong>input</strong>" in _frame_page(result.data["text/html"])
    assert "report.html" not in result.data["text/plain"]  # no file to point at
    after = executed["cells"]["after_disk"]
    assert _stream(after).strip() == "still here 5"


def test_an_interrupted_cell_keeps_its_report_and_the_kernel_survives(executed: dict[str, Any]) -> None:
    cell, out = executed["cells"]["interrupted"], executed["out"]["interrupted"]
    (error,) = _outputs(cell, "error")
    assert error.ename == "KeyboardInterrupt"
    (shown,) = _outputs(cell, "display_data")  # the report of the steps before the interrupt
    assert "<strong>input</strong>" in _frame_page(shown.data["text/html"])
    report = json.loads((out / "report.json").read_text())
    assert report["outcome"]["reason"] == "interrupted" and report["steps"]["observed"] > 0
    alive = executed["cells"]["alive_after_interrupt"]
    assert not _outputs(alive, "error")
    assert _stream(alive).strip().endswith(" True")  # the kernel runs on, its signal handlers as they were


def test_a_bad_option_is_one_line_and_the_cell_does_not_run(executed: dict[str, Any]) -> None:
    cell = executed["cells"]["bad_option"]
    assert not _outputs(cell, "error")  # IPython prints a UsageError as one line, no traceback
    assert _stream(cell).strip() == "UsageError: %%supplyline: argument --steps: must be at least 1, not 0"

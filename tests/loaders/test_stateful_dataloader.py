"""torchdata's StatefulDataLoader (torchdata==0.11.0, pinned in the test extra): the doctor sees it,
names it, judges the stall, writes the fix in its own class, rebuilds it as itself for the trial;
``supplyline run --apply`` changes it; its ``state_dict()`` keeps working under both.

Two jobs in all (each costs a torch import): one doctor run shared by the doctor's assertions, one
``run --apply`` run. The rest runs in-process on small tensors.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from supplyline.apply.loader import LoaderSettings, rebuild_loader

JOB = os.path.join(os.path.dirname(__file__), "zoo", "stateful_starved.py")
OBSERVED = 30


def run_cli(args: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    """``python -m supplyline ARGS`` in a child process; the timeout guards against hangs only."""
    env = {**os.environ, "COLUMNS": "100"}  # the one-screen summary is judged at 100 columns
    return subprocess.run(
        [sys.executable, "-m", "supplyline", *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


class Doctored:
    def __init__(self, proc: Any, out: str) -> None:
        self.proc = proc
        with open(os.path.join(out, "report.json")) as fh:
            self.report: dict[str, Any] = json.load(fh)


@pytest.fixture(scope="module")
def doctored(tmp_path_factory: pytest.TempPathFactory) -> Doctored:
    """The planted job (per-sample CPU work, num_workers=0) once under the doctor, trial included."""
    tmp = tmp_path_factory.mktemp("stateful_doctor")
    out = str(tmp / "report")
    args = ["doctor", "--out", out, "--steps", str(OBSERVED), "--what-if-steps", "10", "--try-steps", "30"]
    proc = run_cli([*args, JOB, "400"], cwd=str(tmp))
    assert proc.returncode == 0, proc.stderr
    return Doctored(proc, out)


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("stateful_apply")
    proc = run_cli(["run", "--apply", "num_workers=2,prefetch_factor=4,persistent_workers", JOB, "60"], cwd=str(tmp))
    assert proc.returncode == 0, proc.stderr
    return proc


# -- the doctor -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_doctor_measures_and_judges_the_stall(doctored: Doctored) -> None:
    rep = doctored.report
    assert rep["verdict"]["bound"] == "input", rep["verdict"]
    assert rep["phase_share"]["data_wait"] > 0.5
    assert not any("no DataLoader was seen" in n for n in rep["notes"]), rep["notes"]
    # The training thread does the per-sample work itself: a prep stall (or mixed on a crowded host).
    assert rep["dataloader"]["stall"] in ("prep", "mixed"), rep["dataloader"]


@pytest.mark.slow
def test_doctor_names_the_loader_class_and_writes_the_fix_in_it(
    doctored: Doctored, words_follow_figures: Any, one_screen: Any
) -> None:
    rep = doctored.report
    assert rep["dataloader"]["loader_type"] == "StatefulDataLoader"
    assert rep["dataloader"]["loader_module"].startswith("torchdata.stateful_dataloader")
    top = rep["findings"][0]
    assert top["check"] == "dataloader", top
    assert "on the StatefulDataLoader" in top["evidence"]
    assert re.search(r"StatefulDataLoader\(\.\.\., num_workers=[1-9]", top["fix"]), top["fix"]
    assert "StatefulDataLoader batch_size=16 num_workers=0" in doctored.proc.stderr  # the summary
    words_follow_figures(rep, doctored.proc.stderr)
    one_screen(rep, doctored.proc.stderr)  # its one fix is in the StatefulDataLoader's own class
    assert "Fix (dataloader)" in doctored.proc.stderr


@pytest.mark.slow
def test_doctor_trial_rebuilds_a_stateful_dataloader(doctored: Doctored) -> None:
    trial = next(t for t in doctored.report["trials"] if t["fix"] in ("dataloader", "storage"))
    assert trial["loader_type"] == "StatefulDataLoader"
    assert trial["settings"]["num_workers"] >= 1 and trial["steps"] > 0
    assert trial["measured_speedup"] is not None  # measured, not asserted: benchmarks/loaders.py
    assert "a new StatefulDataLoader over the same dataset" in doctored.proc.stderr


@pytest.mark.slow
def test_state_dict_works_under_the_doctor(doctored: Doctored) -> None:
    # The script asks its loader for its state every 10 steps (as a checkpoint would): in the observed
    # steps the state counts exactly the batches handed out.
    states = [tuple(map(int, m)) for m in re.findall(r"state at step (\d+) num_yielded (\d+)", doctored.proc.stdout)]
    observed = [(step, n) for step, n in states if step < OBSERVED]
    assert observed == [(s, s + 1) for s in range(9, OBSERVED, 10)], doctored.proc.stdout


# -- run --apply ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_run_apply_changes_the_stateful_dataloader_and_it_still_resumes(applied: Any) -> None:
    out = applied.stdout
    assert "loader StatefulDataLoader num_workers=2 prefetch_factor=4 persistent_workers=True" in out
    assert "StatefulDataLoader(s) changed (num_workers 0→2" in applied.stderr
    # Its state, saved with the new workers, loads into a fresh loader that goes on where it stood.
    assert "state num_workers=2 yielded 60" in out
    nxt = re.search(r"next (\[.*?\]) resumed (\[.*?\])", out)
    assert nxt is not None, out
    assert nxt.group(1) == nxt.group(2)


# -- in-process: the rebuilt loader and the settings patch ----------------------------------------
def _dataset() -> TensorDataset:
    return TensorDataset(torch.arange(64))


def test_rebuild_keeps_the_class_its_own_arguments_and_resumability() -> None:
    loader = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True, snapshot_every_n_steps=3)
    rebuilt = rebuild_loader(loader, {"num_workers": 1, "prefetch_factor": 2})
    assert type(rebuilt) is StatefulDataLoader
    assert (rebuilt.num_workers, rebuilt.prefetch_factor, rebuilt.snapshot_every_n_steps) == (1, 2, 3)
    assert rebuilt.sampler is loader.sampler
    batches = iter(rebuilt)
    next(batches)
    state = rebuilt.state_dict()
    resumed = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True, num_workers=1)
    resumed.load_state_dict(state)
    assert torch.equal(next(iter(resumed))[0], next(batches)[0])


def test_a_subclass_without_the_settings_is_rebuilt_as_a_plain_dataloader() -> None:
    class Fixed(DataLoader):  # type: ignore[type-arg]  # a loader whose __init__ fixes its settings
        def __init__(self, dataset: Any) -> None:
            super().__init__(dataset, batch_size=8)

    rebuilt = rebuild_loader(Fixed(_dataset()), {"num_workers": 1})
    assert type(rebuilt) is DataLoader and rebuilt.batch_size == 8 and rebuilt.num_workers == 1


def test_settings_reach_stateful_loaders_and_subclasses_defined_later() -> None:
    settings = LoaderSettings({"num_workers": 2, "prefetch_factor": 4}, apply_to="all").install()
    try:

        class Later(StatefulDataLoader):  # type: ignore[type-arg]  # defined after the install
            def __init__(self, dataset: Any, num_workers: int = 0, **kwargs: Any) -> None:
                super().__init__(dataset, num_workers=num_workers, **kwargs)

        made = StatefulDataLoader(_dataset(), batch_size=4)
        later = Later(_dataset(), batch_size=4)
        assert (made.num_workers, made.prefetch_factor) == (2, 4)
        assert (later.num_workers, later.prefetch_factor) == (2, 4)
        assert len(settings.changed) == 2  # Later's super().__init__ is not a second loader
        assert "StatefulDataLoader(s) changed" in settings.summary() and "Later" in settings.summary()
    finally:
        settings.uninstall()
    assert StatefulDataLoader(_dataset()).num_workers == 0
    assert Later(_dataset()).num_workers == 0  # the later class's patch came off too
    assert "__init_subclass__" not in DataLoader.__dict__


# -- in-process: the hooks ------------------------------------------------------------------------
def test_hooks_see_each_stateful_fetch_once_and_come_off() -> None:
    from torch import nn
    from torchdata.stateful_dataloader.stateful_dataloader import _StatefulBaseDataLoaderIter

    from supplyline.collect.steps import StepClock
    from supplyline.collect.torch_hooks import Controller, TorchHooks

    own_iter, own_next = StatefulDataLoader.__dict__["__iter__"], _StatefulBaseDataLoaderIter.__dict__["__next__"]
    clock = StepClock()
    hooks = TorchHooks(clock, Controller())
    hooks.install()
    try:
        model = nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = StatefulDataLoader(TensorDataset(torch.randn(40, 1)), batch_size=4)
        for (x,) in loader:  # 10 batches, then the end-of-epoch fetch
            model(x).sum().backward()
            opt.step()
        state = loader.state_dict()
        clock.finish()
    finally:
        hooks.uninstall()
    (info,) = hooks.loaders.values()
    assert (info.loader_type, info.epochs_started) == ("StatefulDataLoader", 1)
    assert info.batches_fetched == 10  # the override's super().__next__() is not a second fetch
    assert sum(clock.steps["batches"]) == 10
    assert state["_num_yielded"] == 10
    assert StatefulDataLoader.__dict__["__iter__"] is own_iter
    assert _StatefulBaseDataLoaderIter.__dict__["__next__"] is own_next


def test_a_state_saved_without_the_new_workers_still_loads(capfd: pytest.CaptureFixture[str]) -> None:
    # Saved by an earlier run without --apply (num_workers=0): torchdata loads it only into a loader
    # with as many workers, so the changed loader goes back to the script's settings to resume.
    before = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True)
    batches = iter(before)
    next(batches)
    state = before.state_dict()
    expected = next(batches)[0]
    settings = LoaderSettings({"num_workers": 2, "prefetch_factor": 4, "persistent_workers": True}).install()
    try:
        loader = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True)
        assert loader.num_workers == 2
        loader.load_state_dict(state)
        assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (0, None, False)
        assert torch.equal(next(iter(loader))[0], expected)
        assert "back to the script's settings to load its saved state" in settings.summary()
    finally:
        settings.uninstall()
    assert "saved state was made with num_workers=0" in capfd.readouterr().err
    # A state saved with the new workers loads as it is: the loader keeps them.
    settings = LoaderSettings({"num_workers": 1}).install()
    try:
        saver = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True)
        it = iter(saver)
        next(it)
        loader = StatefulDataLoader(_dataset(), batch_size=4, shuffle=True)
        loader.load_state_dict(saver.state_dict())
        expected = next(it)[0]
        assert loader.num_workers == 1 and torch.equal(next(iter(loader))[0], expected)
    finally:
        settings.uninstall()


def test_a_generator_iter_subclass_is_counted_once() -> None:
    from supplyline.collect.steps import StepClock
    from supplyline.collect.torch_hooks import Controller, TorchHooks

    clock = StepClock()
    hooks = TorchHooks(clock, Controller())
    hooks.install()
    try:

        class Wrapping(DataLoader):  # type: ignore[type-arg]  # defined after the install
            def __iter__(self) -> Any:
                yield from super().__iter__()

        for _ in Wrapping(_dataset(), batch_size=8):
            pass
    finally:
        hooks.uninstall()
    (info,) = hooks.loaders.values()
    assert (info.loader_type, info.epochs_started, info.batches_fetched) == ("Wrapping", 1, 8)

"""LitData (the real package, pinned by the README's test command) : a ``StreamingDataset`` over
chunks written by ``litdata.optimize``, in a ``StreamingDataLoader``, is judged like any loader,
the fix names the loader's knobs, the trial rebuilds a StreamingDataLoader over the same dataset,
and the job itself runs to its end. The speed-up is not asserted here (see docs/loaders.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("litdata")

from supplyline.analyze.trial_result import trial_decision

JOB = os.path.join(os.path.dirname(__file__), "zoo", "litdata_starved.py")


@pytest.fixture(scope="module")
def chunks(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = str(tmp_path_factory.mktemp("litdata") / "optimized")
    proc = subprocess.run([sys.executable, JOB, "--prepare", folder], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.mark.slow
def test_a_starved_streaming_dataset_gets_workers_and_a_trial(
    tmp_path, doctor_job, chunks, words_follow_figures, one_screen
) -> None:
    proc, rep = doctor_job(JOB, "300", chunks)
    d = rep["dataloader"]
    assert (d["loader_type"], d["dataset_type"], d["num_workers"], d["stall"]) == (
        "StreamingDataLoader",
        "StreamingDataset",
        0,
        "prep",
    ), d
    assert rep["verdict"]["bound"] == "input", rep["verdict"]
    top = rep["findings"][0]
    assert top["check"] == "dataloader" and "num_workers=" in top["fix"], top
    trial = rep["trials"][0] if rep["trials"] else {}
    assert trial.get("fix") == "dataloader" and trial.get("measured_speedup"), rep["trials"]
    assert trial.get("loader_type") == "StreamingDataLoader", trial
    if trial_decision(trial["measured_speedup"], trial["spread"]) == "faster":
        # the change is written in the loader's own name (on a crowded machine the trial may measure
        # no gain, and the fix then says so instead: words_follow_figures checks that)
        assert "StreamingDataLoader(..., num_workers=" in top["fix"], top["fix"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)


@pytest.mark.slow
def test_run_apply_changes_the_streaming_dataloader(tmp_path, chunks) -> None:
    spec = "num_workers=2,prefetch_factor=4,persistent_workers"
    proc = subprocess.run(
        [sys.executable, "-m", "supplyline", "run", "--apply", spec, JOB, "60", chunks],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 StreamingDataLoader(s) changed (num_workers 0→2" in proc.stderr, proc.stderr
    assert "rate " in proc.stdout  # the job ran to its end with the new workers


def test_a_trial_loader_writes_on_its_own_copy_of_the_dataset(chunks) -> None:
    # StreamingDataLoader.__init__ sets the worker count on its dataset: the trial's loader must
    # not leave the script's 0-worker dataset configured as 2 workers (it would read half the data)
    from litdata import StreamingDataLoader, StreamingDataset

    from supplyline.apply.loader import rebuild_loader

    ds = StreamingDataset(chunks)
    loader = StreamingDataLoader(ds, batch_size=16, num_workers=0)
    before = (ds.num_workers, ds.batch_size)  # as the script's loader set them (litdata counts 0 workers as 1)
    trial = rebuild_loader(loader, {"num_workers": 2, "prefetch_factor": 4})
    assert type(trial) is StreamingDataLoader and trial.num_workers == 2
    assert trial.dataset is not ds and trial.dataset.num_workers == 2
    assert (ds.num_workers, ds.batch_size) == before
    batch = next(iter(trial))
    assert batch["x"].shape == (16, 64)  # the collate function, unwrapped once, still batches


@pytest.mark.slow
def test_a_healthy_streaming_dataset_is_compute_bound(
    tmp_path, doctor_job, chunks, words_follow_figures, one_screen
) -> None:
    proc, rep = doctor_job(JOB, "300", chunks, "--healthy")
    assert rep["verdict"]["bound"] == "compute", rep["verdict"]
    assert not any(f["check"] == "dataloader" for f in rep["findings"]), rep["findings"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)

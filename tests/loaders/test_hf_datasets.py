"""Hugging Face ``datasets`` (the real package, pinned in the test extras) in a torch DataLoader: a
map-style ``Dataset`` with a per-sample ``set_transform`` is judged like any dataset, the fix names
the DataLoader's knobs, the trial rebuilds the loader over the same HF dataset, and a healthy job is
compute-bound. The speed-up is not asserted here (see docs/loaders.md)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("datasets")

JOB = os.path.join(os.path.dirname(__file__), "zoo", "hf_starved.py")


@pytest.mark.slow
def test_a_starved_hf_dataset_gets_workers_and_a_trial(tmp_path, doctor_job, words_follow_figures, one_screen) -> None:
    proc, rep = doctor_job(JOB, "300")
    d = rep["dataloader"]
    assert (d["loader_type"], d["dataset_type"], d["num_workers"], d["stall"]) == (
        "DataLoader",
        "Dataset",
        0,
        "prep",
    ), d
    assert rep["verdict"]["bound"] == "input", rep["verdict"]
    top = rep["findings"][0]
    assert top["check"] == "dataloader" and "num_workers=" in top["fix"], top
    # The trial rebuilt a DataLoader over the same HF dataset (its transform runs in the workers).
    assert rep["trials"] and rep["trials"][0]["fix"] == "dataloader", rep["trials"]
    assert rep["trials"][0]["measured_speedup"], rep["trials"][0]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)


@pytest.mark.slow
def test_a_healthy_hf_dataset_is_compute_bound(tmp_path, doctor_job, words_follow_figures, one_screen) -> None:
    proc, rep = doctor_job(JOB, "300", "--healthy")
    assert rep["verdict"]["bound"] == "compute", rep["verdict"]
    assert not any(f["check"] == "dataloader" for f in rep["findings"]), rep["findings"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)


def test_the_shard_cap_and_its_sentence() -> None:
    from supplyline.analyze.recommend import shard_cap, shards_note
    from supplyline.collect.events import LoaderInfo

    def info(workers: int, shards: int | None) -> LoaderInfo:
        return LoaderInfo(
            1, 16, workers, False, None, False, None, "IterableDataset", None, "datasets", dataset_shards=shards
        )

    assert shard_cap(4, info(0, 2)) == 2 and shard_cap(4, info(0, None)) == 4 and shard_cap(1, info(0, 2)) == 1
    assert shards_note(info(0, 4), 2) == ""  # enough shards for the workers wanted
    said = shards_note(info(0, 1), 2)
    assert "splits into 1 shard(s)" in said and "to_iterable_dataset(num_shards=2)" in said
    said = shards_note(info(4, 1), 2)
    assert "3 of the 4 workers it has now get none" in said and "num_shards=4" in said


@pytest.mark.slow
def test_an_iterable_hf_dataset_with_one_shard_is_not_given_more_workers_than_shards(
    tmp_path, doctor_job, words_follow_figures, one_screen
) -> None:
    # to_iterable_dataset(num_shards=1): datasets gives a second worker no data and stops it, so the
    # doctor recommends and tries one worker, and says how to get more
    proc, rep = doctor_job(JOB, "300", "--iterable", "1")
    d = rep["dataloader"]
    assert (d["dataset_type"], d["dataset_shards"], d["num_workers"]) == ("IterableDataset", 1, 0), d
    assert rep["dataloader_recommended"]["num_workers"]["recommended"] <= 1, rep["dataloader_recommended"]
    top = rep["findings"][0]
    assert top["check"] == "dataloader" and "to_iterable_dataset(num_shards=2)" in top["fix"], top
    for trial in rep["trials"]:
        assert trial["settings"].get("num_workers", 0) <= 1, trial
        for seg in trial["segments"]:
            assert seg["settings"].get("num_workers", 0) <= 1, seg
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)

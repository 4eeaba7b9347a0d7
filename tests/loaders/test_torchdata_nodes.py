"""torchdata.nodes pipelines (the real package, pinned in the test extras) under the doctor: the wait
is seen on the pipeline's Loader, the fix is written in its nodes' knobs, no trial is attempted and
the report says why, and the pipeline's own state_dict() resume still works.

The speed-up of the fix is measured in benchmarks/loaders.py --nodes, not asserted here."""

from __future__ import annotations

import os
import re

import pytest
import torch

tn = pytest.importorskip("torchdata.nodes")

from supplyline.collect.nodes import describe, display_name, walk  # noqa: E402

JOB = os.path.join(os.path.dirname(__file__), "zoo", "nodes_starved.py")


class Square:
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> int:
        return i * i


def test_describe_reads_the_knobs_off_the_nodes() -> None:
    ds = Square()
    node = tn.SamplerWrapper(torch.utils.data.SequentialSampler(ds))
    node = tn.ParallelMapper(node, map_fn=ds.__getitem__, num_workers=3, method="thread")
    node = tn.Batcher(node, batch_size=4, drop_last=False)
    node = tn.Mapper(node, lambda b: b)  # a collate: a mapper with 0 workers nearer the root
    node = tn.PinMemory(node) if torch.cuda.is_available() else node
    node = tn.Prefetcher(node, prefetch_factor=5)
    p = describe(tn.Loader(node))
    assert (p.batch_size, p.num_workers, p.method, p.prefetch_factor) == (4, 3, "thread", 5)
    assert p.dataset_type == "Square" and p.dataset_len == 10 and p.mappers == 2
    assert display_name("Loader", "torchdata.nodes.loader") == "torchdata.nodes Loader"


def test_describe_walks_prebatch_and_several_sources() -> None:
    ds = Square()
    a = tn.ParallelMapper(
        tn.SamplerWrapper(torch.utils.data.SequentialSampler(ds)), ds.__getitem__, num_workers=2, prebatch=4
    )
    b = tn.IterableWrapper(range(5))
    mixed = tn.MultiNodeWeightedSampler({"a": a, "b": b}, {"a": 0.5, "b": 0.5})
    nodes = walk(tn.Loader(mixed).root)
    assert any(n is a for n in nodes) and any(n is b for n in nodes)
    p = describe(tn.Loader(mixed))
    assert p.num_workers == 2 and p.dataset_type == "Square"  # the prebatched map_fn is unwrapped
    assert p.prefetch_factor is None and p.batch_size is not None  # prebatch adds its own Batcher


@pytest.mark.slow
def test_a_starved_pipeline_gets_the_fix_in_its_own_nodes(
    tmp_path, doctor_job, words_follow_figures, one_screen
) -> None:
    proc, rep = doctor_job(JOB, "400")
    assert rep["dataloader"]["loader_type"] == "Loader"
    assert rep["dataloader"]["loader_module"] == "torchdata.nodes.loader"
    assert rep["dataloader"]["worker_method"] == "thread" and rep["dataloader"]["num_workers"] == 1
    assert rep["verdict"]["bound"] == "input" and "waiting for the torchdata.nodes Loader" in rep["verdict"]["sentence"]
    assert rep["phase_share"]["data_wait"] > 0.2  # 26–48% over 8 runs: the GIL stretches the step too
    assert rep["dataloader"]["stall"] == "prep", rep["dataloader"]
    top = rep["findings"][0]
    assert top["check"] == "dataloader", top
    # The one thread worker and the training thread share the GIL: the knob is the mapper's method.
    assert re.search(r'ParallelMapper\(\.\.\., num_workers=[2-9], method="process"\)', top["fix"]), top["fix"]
    assert "Prefetcher(..., prefetch_factor=" in top["fix"] and "cannot try it in-process" in top["fix"]
    assert not rep["trials"] and any("not rebuilt in-process" in n for n in rep["notes"]), rep["notes"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)
    assert "+ ParallelMapper(..., num_workers=" in proc.stderr and "Run:" not in proc.stderr


@pytest.mark.slow
def test_a_healthy_pipeline_is_compute_bound(tmp_path, doctor_job, words_follow_figures, one_screen) -> None:
    # 28 steps: the job ends before the doctor's 30, so its own resume check runs under the hooks.
    proc, rep = doctor_job(JOB, "28", "--healthy")
    assert rep["dataloader"]["loader_module"] == "torchdata.nodes.loader"
    assert rep["verdict"]["bound"] == "compute", rep["verdict"]
    assert not any(f["check"] == "dataloader" for f in rep["findings"]), rep["findings"]
    words_follow_figures(rep, proc.stderr)
    one_screen(rep, proc.stderr)
    # Resuming from the pipeline's own state_dict() still works under the doctor.
    found = re.search(r"^next (\[.*?\]) resumed (\[.*?\])$", proc.stdout, flags=re.M)
    assert found and found.group(1) == found.group(2), proc.stdout

"""Suggestions keyed to measurements, and a DataLoader as the target."""

from __future__ import annotations

from torch.utils.data import DataLoader


def test_waiting_dataset_gets_the_io_wait_suggestion(dsmod, quick):
    report = quick(dsmod.Sleeper(), samples=10)
    assert report.cpu_share < 0.5
    io = next(s for s in report.suggestions if s.kind == "io_wait")
    assert "Sleeper.__getitem__" in io.where and "of __getitem__ wall time is CPU" in io.measured
    assert not [s for s in report.suggestions if s.kind == "python_loop"]


def test_one_slow_index_is_named(dsmod, quick):
    report = quick(dsmod.OneSlowIndex(), samples=20)
    assert report.getitem.slowest[0][0] == dsmod.OneSlowIndex.SLOW
    outlier = next(s for s in report.suggestions if s.kind == "outliers")
    assert outlier.measured.startswith(f"slowest samples {dsmod.OneSlowIndex.SLOW} (")


def test_dataloader_target_lends_its_batch_size_and_collate(dsmod, quick):
    calls = []

    def collate(batch):
        calls.append(len(batch))
        return batch

    report = quick(DataLoader(dsmod.Tensors(), batch_size=8, collate_fn=collate), samples=24)
    assert report.dataset_type.endswith("pp_datasets.Tensors")
    assert report.collate.count == 3 and calls == [8, 8, 8]

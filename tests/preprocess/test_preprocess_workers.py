"""Inside real DataLoader workers: per-worker profiles merged with pstats; the worker->trainer hand-over;
image decoders measured on the dataset's own files."""

from __future__ import annotations

import os
import pstats

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("start_method, workers", [("fork", 2), ("spawn", 1)])  # spawn: each worker imports torch
def test_each_worker_is_profiled_and_the_profiles_merge(dsmod, quick, tmp_path, start_method, workers):
    prof = tmp_path / "main.prof"
    report = quick(
        dsmod.PixelLoop(),
        samples=12,
        workers=workers,
        batch_size=4,
        prof_path=str(prof),
        start_method=start_method,
        line_seconds=0.1,
    )
    w = report.workers
    assert w is not None, report.notes
    assert w.workers == workers and w.start_method == start_method and w.batches == 3
    assert sorted(p.worker_id for p in w.per_worker) == list(range(workers))
    assert len({p.pid for p in w.per_worker}) == workers and os.getpid() not in {p.pid for p in w.per_worker}
    assert sum(p.getitem_calls for p in w.per_worker) == 12
    assert all("normalize_pixels" in p.top_function for p in w.per_worker if p.getitem_calls)
    assert w.merged_prof_path == str(tmp_path / "main.workers.prof")
    merged = pstats.Stats(w.merged_prof_path)
    calls = {name: entry[1] for (_f, _l, name), entry in merged.stats.items()}  # type: ignore[attr-defined]
    assert calls["normalize_pixels"] == 12  # every worker's calls, summed by the merge
    assert w.top[0].location.function == "normalize_pixels"


@pytest.mark.slow
def test_transfer_reports_sizes_and_a_measured_time(dsmod, quick):
    report = quick(dsmod.Tensors(), samples=32, batch_size=16, measure_transfer=True)
    t = report.transfer
    assert t.batch_size == 16
    assert t.tensor_bytes == 16 * 3 * 32 * 32 * 4 + 16 * 8  # images float32 + int64 labels
    assert t.pickled_bytes > t.tensor_bytes  # plain pickle carries the data plus framing
    assert t.transfer_ms_per_batch > 0 and t.throughput_mb_s > 0
    assert report.collate.count == 2


def test_decoders_are_measured_on_the_files_the_dataset_opened(dsmod, quick, tmp_path):
    dsmod.make_jpegs(str(tmp_path))
    report = quick(dsmod.JpegFiles(str(tmp_path)), samples=6)
    assert report.profile.decode_share > 0.2
    decode = report.decode
    assert decode is not None and decode.files == 6
    names = [d.name for d in decode.decoders]
    assert "PIL" in names and "PIL draft (1/2 scale)" in names
    assert all(d.ms_per_image > 0 for d in decode.decoders)
    pil = next(d for d in decode.decoders if d.name == "PIL")
    assert pil.speedup_vs_pil == pytest.approx(1.0)
    suggestion = next(s for s in report.suggestions if s.kind == "decode")
    assert "JpegFiles.__getitem__" in suggestion.where or "__getitem__" in suggestion.where
    assert f"{dsmod.__file__}:" in suggestion.where
    assert "PIL" in suggestion.measured

"""GIL check: pure-Python work holds it, large NumPy operations release it.

The machine is shared, so nothing here asserts absolute speed: processes are compared with threads
in the same run. When other programs hold the cores, throughput cannot show the difference; then it
shows in how long the threads were blocked waiting for the GIL (Linux schedstat), which the verdict uses.
"""

from __future__ import annotations

import pytest

from supplyline.preprocess.gil import GIL_RATIO, GIL_WAIT_SHARE, INCONCLUSIVE_BELOW


@pytest.mark.slow
def test_gil_bound_work_scales_with_processes_not_threads(dsmod, quick):
    gil = quick(dsmod.GilBound(), samples=8, workers=2, gil_check=True, line_seconds=0.1).gil
    assert gil.parallelism == 2
    assert gil.thread_scaling < 1.5  # near 1: the threads take turns (load noise aside)
    by_throughput = gil.process_scaling / gil.thread_scaling >= GIL_RATIO
    by_schedstat = gil.gil_wait_share is not None and gil.gil_wait_share >= GIL_WAIT_SHARE
    assert by_throughput or by_schedstat, gil
    assert gil.holds_gil
    assert "holds the GIL" in gil.verdict


@pytest.mark.slow
def test_numpy_work_that_releases_the_gil_is_not_flagged(dsmod, quick):
    report = quick(dsmod.NumpyHeavy(), samples=8, workers=2, gil_check=True, line_seconds=0.1)
    gil = report.gil
    assert not gil.holds_gil, gil.verdict
    if gil.gil_wait_share is not None:
        assert gil.gil_wait_share < GIL_WAIT_SHARE
    elif gil.process_scaling >= INCONCLUSIVE_BELOW:
        assert gil.process_scaling / gil.thread_scaling < GIL_RATIO
    assert not [s for s in report.suggestions if s.kind == "gil"]

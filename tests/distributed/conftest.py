from __future__ import annotations

import subprocess

import pytest
from distributed_helpers import TRAIN, run, torchrun


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], str]:
    """Plain torchrun around the doctor; rank 1's dataset sleeps 3 ms per sample (24 ms per batch)."""
    tmp = tmp_path_factory.mktemp("straggler")
    out = str(tmp / "report")
    proc = run(
        torchrun(
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "supplyline",
            "doctor",
            "--steps",
            "20",
            "--no-what-if",
            "--out",
            out,
            "--",
            TRAIN,
            "--slow-rank",
            "1",
            "--slow-ms",
            "3",
        ),
        str(tmp),
    )
    return proc, out

"""Datasets for the tune tests live in a module file written here, so that DataLoader workers
(fork- or spawn-started) and the CLI child can import them by name."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

import supplyline

DATASETS = textwrap.dedent('''
    import os
    import signal
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info


    class Sleepy(Dataset):
        """Items that wait (like storage latency) and cost almost no CPU."""
        def __init__(self, n=600, ms=2.0):
            self.n, self.ms = n, ms
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            time.sleep(self.ms / 1e3)
            return torch.full((8,), float(i))


    class Empty(Dataset):
        def __len__(self):
            return 0
        def __getitem__(self, i):
            raise IndexError(i)


    class RaisesAt(Dataset):
        def __len__(self):
            return 100
        def __getitem__(self, i):
            if i == 37:
                raise ValueError("corrupt record")
            return torch.zeros(4)


    class KillsSecondWorker(Dataset):
        """Worker 1 dies as a segfaulting decoder would; worker 0 and the main process are fine."""
        def __len__(self):
            return 400
        def __getitem__(self, i):
            info = get_worker_info()
            if info is not None and info.id >= 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.zeros(4)


    class Big(Dataset):
        """Each worker holds a large buffer: for the memory limit."""
        def __init__(self):
            self.buffer = None
        def __len__(self):
            return 10_000
        def __getitem__(self, i):
            if self.buffer is None:
                self.buffer = bytearray(64 * 1024 * 1024)
                self.buffer[::4096] = b"x" * len(self.buffer[::4096])
            time.sleep(0.002)
            return torch.zeros(4)


    def pair_collate(items):
        return {"x": torch.stack(items), "n": len(items)}


    SEEN = []


    def count_batch(batch):
        """A user consumer: records each batch's size."""
        SEEN.append(len(batch))


    def make_loader():
        return DataLoader(Sleepy(120, 1.0), batch_size=8, num_workers=1, collate_fn=pair_collate)


    def spawn_loader():
        return DataLoader(Sleepy(120, 1.0), batch_size=8, num_workers=1, multiprocessing_context="spawn")


    sleepy = Sleepy()
    slow = Sleepy(n=40, ms=150.0)
    empty = Empty()
    raises = RaisesAt()
    kills = KillsSecondWorker()
    big = Big()
    NUMBER = 3
''')


@pytest.fixture(scope="session")
def dsdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tune_datasets")
    (root / "tune_ds.py").write_text(DATASETS)
    return root


@pytest.fixture
def ds_import(dsdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Makes ``tune_ds`` importable in this process (and in workers it starts)."""
    monkeypatch.syspath_prepend(str(dsdir))
    sys.modules.pop("tune_ds", None)
    return dsdir


@pytest.fixture
def ds_env(dsdir: Path) -> dict[str, str]:
    """Environment for a CLI child: supplyline's source and the datasets on its path."""
    src = str(Path(supplyline.__file__).resolve().parent.parent)
    parts = [str(dsdir), src] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in parts)}

"""Datasets that read what ``supplyline pack`` writes.

``ShardDataset(DST, shuffle_buffer=..)`` — webdataset shards, split across DataLoader workers and
distributed ranks; ``LMDBDataset(DST)`` — map-style, opens LMDB lazily in each worker.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LMDBDataset", "ShardDataset"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import supplyline.datasets.records` does not pull in torch.
    if name == "ShardDataset":
        from supplyline.datasets.shards import ShardDataset

        return ShardDataset
    if name == "LMDBDataset":
        from supplyline.datasets.lmdb_dataset import LMDBDataset

        return LMDBDataset
    raise AttributeError(name)

"""Datasets from streaming libraries whose own knobs the fix should name, read off the dataset object.

MosaicML's ``streaming.StreamingDataset`` (0.13.0) runs inside a plain torch DataLoader, so the
loader's knobs are torch's; its own are the download-ahead depth ``predownload`` (samples a worker
prepares ahead; ``8 * batch_size`` when left unset), the local cache's ``cache_limit``, and whether
it downloads at all (``remote``: with local shards only, neither matters).
"""

from __future__ import annotations

from typing import Any

MOSAIC_MODULE = "streaming.base.dataset"  # where streaming.StreamingDataset is defined


def is_mosaic(dataset: Any) -> bool:
    """A MosaicML ``streaming.StreamingDataset`` or a subclass of it (the documented way to decode)."""
    return any(c.__module__ == MOSAIC_MODULE and c.__name__ == "StreamingDataset" for c in type(dataset).__mro__)


def dataset_knobs(dataset: Any) -> dict[str, Any]:
    """``{"library": "mosaicml-streaming", "predownload": 128, "cache_limit": None, "remote": False}``
    for a MosaicML dataset, ``{}`` for any other. Attributes of the user's object: read defensively."""
    if not is_mosaic(dataset):
        return {}
    try:
        streams = getattr(dataset, "streams", None) or []
        remote = any(getattr(s, "remote", None) for s in streams)
        predownload = getattr(dataset, "predownload", None)
        limit = getattr(dataset, "cache_limit", None)
    except Exception:  # a subclass's property may raise: the knobs are then not named
        return {}
    return {
        "library": "mosaicml-streaming",
        "predownload": predownload if isinstance(predownload, int) else None,
        "cache_limit": limit if isinstance(limit, (int, str)) and not isinstance(limit, bool) else None,
        "remote": bool(remote),
    }

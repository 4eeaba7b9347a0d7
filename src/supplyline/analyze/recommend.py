"""The DataLoader settings the findings recommend, as a table next to the settings seen.

One source for the worker counts: the input findings quote the same numbers in their fix text.
"""

from __future__ import annotations

from typing import Any

from supplyline.analyze.trial_result import LoaderTrial
from supplyline.collect.events import LoaderInfo


def fetch_stall_workers(num_workers: int, cores: int) -> int:
    """Latency-bound reads: more workers than cores keep more reads in flight."""
    return max(num_workers * 2, cores * 2, 4)


def prep_stall_workers(num_workers: int, cores: int) -> int:
    """CPU-bound preparation stops scaling at the core count (8 at most without a measurement)."""
    return max(1, min(cores, 8)) if num_workers < cores else num_workers


def shard_cap(workers: int, loader: LoaderInfo | None) -> int:
    """``workers``, at most the dataset's shards: a worker past the last shard gets none."""
    shards = loader.dataset_shards if loader is not None else None
    return min(workers, shards) if shards else workers


def shards_note(loader: LoaderInfo | None, wanted: int) -> str:
    """The sentence for a sharded IterableDataset with fewer shards than the workers seen or wanted, or ""."""
    shards = loader.dataset_shards if loader is not None else None
    if loader is None or not shards or max(wanted, loader.num_workers) <= shards:
        return ""
    seen = loader.num_workers
    idle = f"; {seen - shards} of the {seen} workers it has now get none and stop" if seen > shards else ""
    return (
        f" Its {loader.dataset_type} splits into {shards} shard(s) between the workers, "
        f"so workers past {shards} get no data{idle}: for more workers make more shards "
        f"(Hugging Face: `to_iterable_dataset(num_shards={max(wanted, seen)})`)."
    )


def streaming_note(loader: LoaderInfo | None) -> str:
    """The sentence for a fetch stall on a MosaicML ``StreamingDataset``, in its own knobs, or "".
    ``predownload`` is how many samples each worker prepares ahead (downloads, for remote shards);
    with local shards only (no ``remote``) it reads in place, and neither knob changes a read."""
    knobs = loader.dataset_knobs if loader is not None else {}
    if knobs.get("library") != "mosaicml-streaming":
        return ""
    depth = knobs.get("predownload")
    if not knobs.get("remote"):
        return (
            " Its MosaicML StreamingDataset reads local shards (no `remote`), so its own "
            "`predownload` and `cache_limit` do not change a read here: the workers and the storage do."
        )
    now = f" (now {depth})" if isinstance(depth, int) else ""
    more = f"predownload={2 * depth}" if isinstance(depth, int) else "predownload=..."
    limit = knobs.get("cache_limit")
    cache = f"; its `cache_limit` ({limit}) must hold the shards that far ahead" if limit else ""
    return (
        f" Its MosaicML StreamingDataset downloads `predownload` samples ahead per worker{now}: "
        f"raise it (`StreamingDataset(..., {more})`){cache}."
    )


def recommended_loader(
    loader: LoaderInfo | None,
    stall: str,
    cores: int,
    cuda: bool,
    input_bound: bool,
    measured: LoaderTrial | None = None,
) -> dict[str, dict[str, Any]] | None:
    """Per setting: ``{"seen": value, "recommended": value, "why": reason}``; after a loader trial
    the loader's settings also carry ``"model"``, what the model alone recommends (the settings the
    finding's predicted gain is for).

    Settings are only changed when the run showed data wait (``input_bound``); a loader that
    keeps up keeps its settings, except pinning, which only matters with a GPU. A loader trial's
    answer (``measured``) outranks the model: its settings when it measured faster, the settings
    seen when it did not.
    """
    if loader is None:
        return None
    nw = loader.num_workers
    rec: dict[str, dict[str, Any]] = {}
    model: dict[str, dict[str, Any]] = {}  # after a trial, the model's own answer beside it

    def put(key: str, value: Any, why: str) -> None:
        rec[key] = {"seen": getattr(loader, key), "recommended": value, "why": why}

    if measured is not None and measured.workers is not None:
        # The model's own answer stays beside the trial's ("model"): what the prediction is for.
        model = recommended_loader(loader, stall, cores, cuda, input_bound) or {}
        tried = ", ".join(f"{k}={v}" for k, v in measured.settings.items())
        if measured.decision == "faster":
            for key in ("num_workers", "prefetch_factor", "persistent_workers"):
                if key in measured.settings:
                    put(key, measured.settings[key], f"the doctor's trial measured {tried} at {measured.figure}")
        elif measured.decision == "failed":
            why = f"the doctor's trial ran {tried} and its workers failed ({measured.failed}); keep what you have"
            for key in ("num_workers", "prefetch_factor", "persistent_workers"):
                put(key, getattr(loader, key), why)
        else:
            why = f"the doctor's trial measured {tried} at {measured.figure}: {measured.decision}; keep what you have"
            for key in ("num_workers", "prefetch_factor", "persistent_workers"):
                put(key, getattr(loader, key), why)
        for key in ("prefetch_factor", "persistent_workers"):
            rec.setdefault(key, {"seen": getattr(loader, key), "recommended": getattr(loader, key), "why": "unchanged"})
    elif input_bound and stall == "fetch":
        workers = shard_cap(fetch_stall_workers(nw, cores), loader)
        put("num_workers", workers, "reads are latency-bound: more workers than cores keep more reads in flight")
    elif input_bound:
        workers = shard_cap(prep_stall_workers(nw, cores), loader)
        put("num_workers", workers, f"parallel preparation scales up to the {cores} cores")
    else:
        workers = nw
        put("num_workers", nw, "the loader keeps up")
    if "prefetch_factor" in rec:  # the trial's answer set them
        pass
    elif workers > 0 and input_bound:
        put("prefetch_factor", max(4, loader.prefetch_factor or 0), "a deeper queue absorbs slow batches")
        put("persistent_workers", True, "workers are not restarted every epoch")
    else:
        put("prefetch_factor", loader.prefetch_factor, "unchanged")
        put("persistent_workers", loader.persistent_workers, "unchanged")
    if cuda:
        put("pin_memory", True, "pinned batches copy to the GPU faster and can overlap compute")
    else:
        put("pin_memory", loader.pin_memory, "no GPU on this host: pinning has no effect")
    put("batch_size", loader.batch_size, "unchanged (a model choice)")
    for key in ("num_workers", "prefetch_factor", "persistent_workers"):
        if key in model:
            rec[key]["model"] = model[key]["recommended"]
    return rec

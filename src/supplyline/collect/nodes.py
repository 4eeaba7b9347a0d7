"""torchdata.nodes pipelines: what their knobs are set to, read from the node graph.

A ``torchdata.nodes.Loader`` wraps a root node; each node holds its input as ``source`` (a
``MultiNodeWeightedSampler`` holds several, ``source_nodes``). The knobs the doctor judges sit on
the nodes, not on the loader (read from torchdata 0.11.0's nodes/map.py, prefetch.py, batch.py,
pin_memory.py): the workers and their method on ``ParallelMapper`` (``Mapper`` is a ParallelMapper
with 0 workers, run inline on the thread that asks for the next item), the queue depth on
``Prefetcher.prefetch_factor``, the batch on ``Batcher.batch_size``.

The hook sits on ``LoaderIterator.__next__`` (the iterator ``iter(Loader)`` returns; it inherits
``BaseNode.__next__``, so the class attribute set here shadows it for the loader only, and the inner
nodes' ``next`` calls stay unhooked). torchdata is patched once the script imported it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supplyline.collect.events import LOOP_MODULE, LOOP_TYPE

LOADER_MODULE = "torchdata.nodes.loader"
MAX_NODES = 200  # a graph walk bound: pipelines have a handful of nodes


@dataclass(frozen=True)
class NodesPipeline:
    batch_size: int | None
    num_workers: int  # the busiest ParallelMapper's (0: the map runs inline)
    method: str  # "thread" | "process" (the busiest mapper's)
    multiprocessing_context: str | None
    prefetch_factor: int | None  # the Prefetcher nearest the loader
    pin_memory: bool
    dataset_type: str  # the class whose __getitem__ the mapper calls, or the map function's name
    dataset_module: str | None
    dataset_len: int | None
    mappers: int  # ParallelMapper nodes in the graph


def display_name(loader_type: str, loader_module: str) -> str:
    """How sentences name a loader: ``DataLoader``, ``StatefulDataLoader``, ``torchdata.nodes Loader``."""
    return f"torchdata.nodes {loader_type}" if loader_module.startswith("torchdata.nodes") else loader_type


def wait_words(loader_type: str, loader_module: str) -> str:
    """What a step's data wait is, in the verdict's words: waiting on a loader, or building the batch."""
    if loader_type == LOOP_TYPE and loader_module == LOOP_MODULE:
        return "building its batch in the training loop (no loader object)"
    return f"waiting for the {display_name(loader_type, loader_module)}"


def wait_name(loader_type: str, loader_module: str) -> str:
    """The data wait as a noun, for the compute-bound sentence: "the DataLoader wait"."""
    if loader_type == LOOP_TYPE and loader_module == LOOP_MODULE:
        return "the batch-building wait"
    return f"the {display_name(loader_type, loader_module)} wait"


def walk(root: Any) -> list[Any]:
    """The graph's nodes, the root first, each once."""
    seen: list[Any] = []
    todo = [root]
    while todo and len(seen) < MAX_NODES:
        node = todo.pop(0)
        if node is None or any(node is s for s in seen):
            continue
        seen.append(node)
        source = node.__dict__.get("source") if hasattr(node, "__dict__") else None
        if source is not None:
            todo.append(source)
        many = getattr(node, "source_nodes", None)
        if isinstance(many, dict):
            todo.extend(many.values())
    return seen


def describe(loader: Any) -> NodesPipeline:
    """The pipeline's knobs; a node of a class we do not know is walked through, not read."""
    nodes = walk(getattr(loader, "root", None))
    by_name: dict[str, list[Any]] = {}
    for node in nodes:
        by_name.setdefault(type(node).__name__, []).append(node)
    mappers = by_name.get("ParallelMapper", [])
    # The mapper doing the work: the one with the most workers; among equals the one nearest the
    # source (the dataset's __getitem__ usually, a collate after the Batcher is nearer the root).
    busiest = max(reversed(mappers), key=lambda m: int(getattr(m, "num_workers", 0) or 0), default=None)
    prefetch = by_name.get("Prefetcher", [None])[0]
    batcher = by_name.get("Batcher", [None])[0]
    fn = getattr(busiest, "map_fn", None) if busiest is not None else None
    fn = getattr(fn, "map_fn", fn)  # prebatch: MapOverBatch(map_fn)
    owner = getattr(fn, "__self__", None)
    kind = type(owner).__qualname__ if owner is not None else getattr(fn, "__qualname__", type(fn).__name__)
    module = type(owner).__module__ if owner is not None else getattr(fn, "__module__", None)
    size: int | None = None
    if owner is not None:
        try:
            size = len(owner)
        except Exception:  # a mapping without a length
            size = None
    return NodesPipeline(
        batch_size=getattr(batcher, "batch_size", None),
        num_workers=int(getattr(busiest, "num_workers", 0) or 0),
        method=str(getattr(busiest, "method", "thread")),
        multiprocessing_context=getattr(busiest, "multiprocessing_context", None),
        prefetch_factor=getattr(prefetch, "prefetch_factor", None),
        pin_memory="PinMemory" in by_name,
        dataset_type=str(kind) if fn is not None else "no mapper",
        dataset_module=module,
        dataset_len=size,
        mappers=len(mappers),
    )

"""A consistent copy of a training state in CPU memory, taken on the caller's thread.

The copy is what makes a background save safe: the optimizer can update the parameters in
place right after ``save()`` returns while the writer thread serializes the copy.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import torch

_TensorKey = tuple[int, int, int, tuple[int, ...], tuple[int, ...], torch.dtype, str]


_BufferKey = tuple[tuple[int, ...], torch.dtype]


def snapshot_to_cpu(state: Any, reuse: Any = None) -> Any:
    """Deep-copy ``state``: every tensor to a CPU tensor, containers rebuilt, other leaves
    deep-copied. Tensors that view the same memory (tied weights) stay shared in the copy, so
    the file is no bigger than ``torch.save`` of the original would be.

    ``reuse``: an earlier snapshot nobody reads any more (its write is done). Its tensors are
    copied into where shape and dtype match: memory already touched copies about 7x faster than
    fresh pages (32 MB: 4 ms against 30 ms, measured on our 2-core machine), and a job saving the
    same state every few steps would otherwise pay the page faults on every save."""
    return _copy(state, {}, _buffers(reuse) if reuse is not None else {})


def tensor_bytes(state: Any) -> int:
    """Bytes of tensor data in ``state``: about the size of its checkpoint file."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(value) for value in state)
    return 0


def _buffers(old: Any) -> dict[_BufferKey, list[torch.Tensor]]:
    """The plain contiguous CPU tensors of an old snapshot by shape and dtype, each memory once (a
    tied weight appears twice in the state but must be handed out only once)."""
    pool: dict[_BufferKey, list[torch.Tensor]] = {}
    seen: set[int] = set()
    for t in _tensors(old):
        if t.device.type != "cpu" or t.layout != torch.strided or t.is_quantized or not t.is_contiguous():
            continue
        if t.untyped_storage().nbytes() != t.numel() * t.element_size():
            continue  # a view into a larger storage: writing it would not free or fill the rest
        if t.untyped_storage().data_ptr() in seen:
            continue
        seen.add(t.untyped_storage().data_ptr())
        pool.setdefault((tuple(t.shape), t.dtype), []).append(t)
    return pool


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors(value)


def _copy(obj: Any, seen: dict[_TensorKey, torch.Tensor], pool: dict[_BufferKey, list[torch.Tensor]]) -> Any:
    if isinstance(obj, torch.Tensor):
        return _copy_tensor(obj, seen, pool)
    if isinstance(obj, dict):
        items = [(key, _copy(value, seen, pool)) for key, value in obj.items()]
        try:
            return type(obj)(items)
        except TypeError:  # dict subclasses with other constructors (defaultdict): plain dict keeps the data
            return dict(items)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_copy(value, seen, pool) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_copy(value, seen, pool) for value in obj)
    if isinstance(obj, (int, float, str, bytes, bool, type(None))):
        return obj
    return copy.deepcopy(obj)


def _copy_tensor(
    tensor: torch.Tensor, seen: dict[_TensorKey, torch.Tensor], pool: dict[_BufferKey, list[torch.Tensor]]
) -> torch.Tensor:
    detached = tensor.detach()
    key = _identity(detached)
    if key is not None and key in seen:
        return seen[key]
    free = pool.get((tuple(detached.shape), detached.dtype))
    if free and detached.layout == torch.strided and not detached.is_quantized and detached.is_contiguous():
        clone = free.pop()
        clone.copy_(detached)  # from CUDA a blocking copy, as below: complete on return
        if key is not None:
            seen[key] = clone
        return clone
    # copy=True: a CPU tensor must still be copied, or the "snapshot" would be the live weights.
    # For CUDA tensors this is a blocking device-to-host copy, so the snapshot is complete on return.
    clone = detached.to("cpu", copy=True)
    if key is not None:
        seen[key] = clone
    return clone


def _identity(tensor: torch.Tensor) -> _TensorKey | None:
    """Same memory, same view: the key under which two tensor objects are one tensor."""
    try:
        storage_ptr = tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # sparse, meta and some subclasses have no plain storage
        return None
    return (
        storage_ptr,
        int(tensor.storage_offset()),
        int(tensor.numel()),
        tuple(tensor.shape),
        tuple(tensor.stride()),
        tensor.dtype,
        str(tensor.device),
    )

"""A consistent copy of a training state in CPU memory, taken on the caller's thread.

The copy is what makes a background save safe: the optimizer can update the parameters in
place right after ``save()`` returns while the writer thread serializes the copy.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

_TensorKey = tuple[int, int, int, tuple[int, ...], tuple[int, ...], torch.dtype, str]


def snapshot_to_cpu(state: Any) -> Any:
    """Deep-copy ``state``: every tensor to a fresh CPU tensor, containers rebuilt, other leaves
    deep-copied. Tensors that view the same memory (tied weights) stay shared in the copy, so
    the file is no bigger than ``torch.save`` of the original would be."""
    return _copy(state, {})


def tensor_bytes(state: Any) -> int:
    """Bytes of tensor data in ``state``: about the size of its checkpoint file."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(value) for value in state)
    return 0


def _copy(obj: Any, seen: dict[_TensorKey, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return _copy_tensor(obj, seen)
    if isinstance(obj, dict):
        items = [(key, _copy(value, seen)) for key, value in obj.items()]
        try:
            return type(obj)(items)
        except TypeError:  # dict subclasses with other constructors (defaultdict): plain dict keeps the data
            return dict(items)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_copy(value, seen) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_copy(value, seen) for value in obj)
    if isinstance(obj, (int, float, str, bytes, bool, type(None))):
        return obj
    return copy.deepcopy(obj)


def _copy_tensor(tensor: torch.Tensor, seen: dict[_TensorKey, torch.Tensor]) -> torch.Tensor:
    detached = tensor.detach()
    key = _identity(detached)
    if key is not None and key in seen:
        return seen[key]
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

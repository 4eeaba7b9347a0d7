"""Hooks into the running job: DataLoader fetches, optimizer steps, backward, H2D copies, logging,
checkpoints. Each patch is undone by ``uninstall``; each wrapper is a few attribute reads and two
clock reads, because it runs on the training thread every step.

Where the hooks sit and why:
- ``_BaseDataLoaderIter.__next__`` is defined once on the base class; both iterators inherit it.
- ``DataLoader.__iter__`` creates the iterator (and starts the workers): its time is data wait too.
- DataLoader subclasses that define their own ``__iter__`` (torchdata's ``StatefulDataLoader``) are
  patched too, now and when the script defines them later (``collect/loader_classes``); iterator
  classes that override ``__next__`` are patched when their first iterator is made. The hooks nest:
  an override that calls ``super()`` reaches the base's wrapper, which then passes straight through,
  so every fetch is timed once.
- ``register_optimizer_step_pre/post_hook`` are global and cover every ``torch.optim.Optimizer``.
- ``Tensor.backward`` calls ``torch.autograd.backward`` by attribute, so patching the module
  function sees every backward.
- ``torch.save`` is patched before the script runs; code that imported it by name earlier keeps
  the original (documented limitation).
"""

from __future__ import annotations

import builtins
import inspect
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data.dataloader import _BaseDataLoaderIter

from supplyline import phases as P
from supplyline.collect.dataset_kind import dataset_knobs
from supplyline.collect.eval_spans import EvalSpans
from supplyline.collect.events import LoaderInfo, SaveEvent, TransferStats
from supplyline.collect.frames import stack_of
from supplyline.collect.loader_classes import overrides, watch_subclasses
from supplyline.collect.loop_wait import LoopWait
from supplyline.collect.nodes import LOADER_MODULE as NODES_LOADER
from supplyline.collect.nodes import describe as describe_nodes
from supplyline.collect.patching import Patcher
from supplyline.collect.saves import SaveRecorder
from supplyline.collect.steps import StepClock

_now = time.perf_counter
_cpu = time.thread_time
_ident = threading.get_ident


class Controller:
    """The DataLoader hook's seam to the doctor (``doctor/schedule.py``): ``serve``, when set, is
    asked first for each counted batch and returns one, or ``PASS`` to let the fetch run as observed.
    The hook keeps the last batch it fetched there, for the replay what-if."""

    def __init__(self) -> None:
        self.serve: Callable[[Any, Callable[[Any], Any]], Any] | None = None
        self.last_batch: Any = None


PASS = object()  # Controller.serve: let the fetch run as observed


class TorchHooks(Patcher):
    """Installs every hook on one StepClock; ``uninstall`` restores the originals."""

    def __init__(self, clock: StepClock, controller: Controller) -> None:
        super().__init__()
        self.clock = clock
        self.ctl = controller
        self.loaders: dict[int, LoaderInfo] = {}
        self.transfers = TransferStats()
        self.save_recorder = SaveRecorder(clock)
        self.eval_spans = EvalSpans(clock)
        self.loop_wait = LoopWait(clock)  # a loop with no loader object: its batch-building time
        self.saves: list[SaveEvent] = self.save_recorder.events
        self.logging_calls = 0
        self._iter_started: dict[int, float] = {}
        # The threads inside a hooked __iter__ / an override's hooked __next__: there, the hook an
        # override reaches through super() passes through. Per thread, so a loader thread of the
        # user's own never makes the training thread's fetch look nested (a set: cheaper than a
        # threading.local's attributes, and an empty one is a single falsy test on the base hook).
        self._iterating: set[int] = set()
        self._fetching: set[int] = set()
        self._iterator_classes: set[type] = {_BaseDataLoaderIter}  # whose own __next__ is hooked (or the base)
        # Checkpoint APIs of modules the script imports later: (module, owner path, attribute, kind).
        self._late: list[tuple[str, str, str, str]] = list(_LATE_SAVE_APIS)
        self._nodes_hooked = False  # torchdata.nodes' Loader, once the script imported it
        # Set by the collective hooks: returns the seconds the last backward was blocked in all-reduce.
        self.after_backward: Callable[[], float] | None = None
        self.datasets: dict[int, Any] = {}  # loader id -> dataset, to name it for `supplyline tune`
        self.loader_objects: dict[int, Any] = {}  # loader id -> the DataLoader, for a fix trial's rebuilt loader
        self.main_module: Any = None  # the script's __main__ while it runs (runpy restores ours after)
        # On CUDA: the per-step CUDA events (collect/cuda_timeline.CudaTimeline); None elsewhere.
        self.timeline: Any = None

    # -- install / uninstall ------------------------------------------------------------------
    def install(self) -> None:
        self._patch(_BaseDataLoaderIter, "__next__", self._wrap_next)
        self._patch(DataLoader, "__iter__", self._wrap_iter)
        self._undo.append(watch_subclasses(self._hook_loader_class))
        self._hook_optimizers()
        self._undo.append(self.loop_wait.disarm)
        self._patch(torch.autograd, "backward", self._wrap_backward)
        self._patch(torch.optim.Optimizer, "__init__", self._wrap_optimizer_init)
        self._patch(builtins, "print", self._wrap_phase(P.LOGGING, count=True))
        self._patch(logging.Logger, "handle", self._wrap_phase(P.LOGGING, count=True))
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                self._patch(os, name, self._wrap_phase(P.LOGGING))
        for owner in (torch, torch.serialization):
            self._patch(owner, "save", self.save_recorder.wrapper("torch.save"))
        _import_safetensors()  # before the script, so `from safetensors.torch import save_file` gets the hook
        if torch.cuda.is_available():  # H2D copies only exist with a device; skip the cost on CPU
            self._patch(torch.Tensor, "to", self._wrap_to)
            self._patch(torch.Tensor, "cuda", self._wrap_to)
        self.maybe_patch_late()
        if self.eval_spans.install():
            self._undo.append(self.eval_spans.uninstall)

    def maybe_patch_late(self) -> None:
        """Hook the checkpoint APIs of modules the script has imported since the last call.

        DCP costs seconds to import and transformers/Lightning are optional: each is patched once
        the script imported it (checked at install, on each optimizer step and each DataLoader epoch).
        torchdata.nodes' loader too (``collect/nodes``).
        """
        if not self._nodes_hooked and NODES_LOADER in sys.modules:
            self._nodes_hooked = True
            try:
                self._hook_nodes(sys.modules[NODES_LOADER])
            except Exception:  # another torchdata: its pipeline goes unseen, the job goes on
                pass
        if not self._late:
            return
        for entry in list(self._late):
            module_name, owner_path, attr, kind = entry
            module = sys.modules.get(module_name)
            if module is None:
                continue
            self._late.remove(entry)
            owner = _resolve(module, owner_path)
            if owner is not None and hasattr(owner, attr):
                self._patch(owner, attr, self.save_recorder.wrapper(kind))

    # -- torchdata.nodes ------------------------------------------------------------------------
    def _hook_nodes(self, module: Any) -> None:
        """``Loader.__iter__`` (the epoch's start: the nodes reset, mappers start their workers) and
        ``LoaderIterator.__next__`` (each batch the training loop takes) get the DataLoader's hooks."""
        hooks = self
        self._patch(module.Loader, "__iter__", self._wrap_nodes_iter)

        def make(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
            timed = self._timed_next(original, nested_passes=False)

            def __next__(it: Any) -> Any:
                if "_supplyline_loader_id" not in it.__dict__:  # an iterator made before the hook
                    loader = it.loader
                    it._supplyline_loader_id = id(loader)
                    if id(loader) not in hooks.loaders:
                        hooks._describe_nodes(loader, sys._getframe(1))
                return timed(it)

            return __next__

        self._patch(module.LoaderIterator, "__next__", make)

    def _wrap_nodes_iter(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def __iter__(loader: Any) -> Any:
            t = _now()
            it = original(loader)
            lid = id(loader)
            info = hooks.loaders.get(lid) or hooks._describe_nodes(loader, sys._getframe(1))
            info.epochs_started += 1
            info.iter_create_s.append(_now() - t)
            it._supplyline_loader_id = lid
            hooks._iter_started[lid] = t
            return it

        return __iter__

    def _describe_nodes(self, loader: Any, caller: Any = None) -> LoaderInfo:
        p = describe_nodes(loader)
        info = LoaderInfo(
            loader_id=id(loader),
            batch_size=p.batch_size,
            num_workers=p.num_workers,
            pin_memory=p.pin_memory,
            prefetch_factor=p.prefetch_factor,
            persistent_workers=False,
            multiprocessing_context=p.multiprocessing_context,
            dataset_type=p.dataset_type,
            dataset_len=p.dataset_len,
            dataset_module=p.dataset_module,
            iter_stack=stack_of(caller, limit=25),
            loader_type=type(loader).__name__,
            loader_module=type(loader).__module__,
            worker_method=p.method if p.num_workers else "thread",
        )
        self.loaders[id(loader)] = info
        self.main_module = sys.modules.get("__main__")
        return info

    # -- DataLoader ---------------------------------------------------------------------------
    def _hook_loader_class(self, cls: type) -> None:
        """A DataLoader subclass (defined now or later): its own ``__iter__`` gets the same hook.

        Not a generator ``__iter__`` (``yield from super().__iter__()``): it returns before any of
        its code runs, and the base hook sees the real iterator made inside it, once."""
        if overrides(cls, "__iter__") and not inspect.isgeneratorfunction(cls.__dict__["__iter__"]):
            self._patch(cls, "__iter__", self._wrap_iter)

    def _hook_iterator_class(self, cls: type) -> None:
        """The first iterator of ``cls``: each class on its way to ``_BaseDataLoaderIter`` that defines
        its own ``__next__`` (torchdata's ``_StatefulBaseDataLoaderIter``) gets the fetch hook."""
        self._iterator_classes.add(cls)
        for klass in cls.__mro__:
            if klass is _BaseDataLoaderIter or not issubclass(klass, _BaseDataLoaderIter):
                break
            if overrides(klass, "__next__") and not getattr(klass.__dict__["__next__"], "_supplyline_fetch", False):
                self._patch(klass, "__next__", self._wrap_override_next)
            self._iterator_classes.add(klass)

    def _wrap_iter(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def __iter__(loader: Any) -> Any:
            tid, iterating = _ident(), hooks._iterating
            if tid in iterating:  # a subclass's __iter__ calling super().__iter__(): timed by the outer one
                return original(loader)
            t = _now()
            iterating.add(tid)
            try:
                it = original(loader)
            finally:
                iterating.discard(tid)
            if type(it) not in hooks._iterator_classes:
                try:
                    hooks._hook_iterator_class(type(it))
                except Exception:  # an odd iterator class: its fetches go unseen, the job goes on
                    pass
            lid = id(loader)
            info = hooks.loaders.get(lid) or hooks._describe(loader, sys._getframe(1))
            info.epochs_started += 1
            info.iter_create_s.append(_now() - t)
            try:
                it._supplyline_loader_id = lid
            except AttributeError:  # a user iterator class with __slots__: fall back to the dataset id
                pass
            hooks._iter_started[lid] = t
            hooks.maybe_patch_late()
            return it

        return __iter__

    def _describe(self, loader: Any, caller: Any = None) -> LoaderInfo:
        ds = loader.dataset
        try:
            n: int | None = len(ds)
        except Exception:
            n = None
        ctx = loader.multiprocessing_context
        info = LoaderInfo(
            loader_id=id(loader),
            batch_size=loader.batch_size,
            num_workers=loader.num_workers,
            pin_memory=bool(loader.pin_memory),
            prefetch_factor=loader.prefetch_factor,
            persistent_workers=bool(loader.persistent_workers),
            multiprocessing_context=(ctx.get_start_method() if ctx is not None else None),
            dataset_type=type(ds).__qualname__,
            dataset_len=n,
            dataset_module=type(ds).__module__,
            iter_stack=stack_of(caller, limit=25),
            loader_type=type(loader).__name__,
            loader_module=type(loader).__module__,
        )
        try:  # a property of the user's class: it may raise
            shards = getattr(ds, "num_shards", None) if isinstance(ds, IterableDataset) else None
        except Exception:
            shards = None
        if isinstance(shards, int) and not isinstance(shards, bool) and shards > 0:
            info.dataset_shards = shards
        info.dataset_knobs = dataset_knobs(ds)
        if type(loader) is DataLoader and _in_webloader(info.iter_stack):
            # webdataset's WebLoader holds a plain DataLoader and iterates it inside its pipeline: the
            # script wrote `wds.WebLoader(..., num_workers=...)`, so the fix is written in that name.
            info.loader_type, info.loader_module = "WebLoader", "webdataset.compat"
        self.loaders[id(loader)] = info
        self.datasets[id(loader)] = ds
        self.loader_objects[id(loader)] = loader
        self.main_module = sys.modules.get("__main__")
        return info

    def _wrap_next(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """The fetch hook on ``_BaseDataLoaderIter.__next__``: inside an override's hook (below) on
        this thread it passes straight through; otherwise (the plain DataLoader) one falsy-set test."""
        return self._timed_next(original, nested_passes=True)

    def _wrap_override_next(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """The fetch hook on an iterator class's own ``__next__`` (torchdata's): times the fetch and
        marks this thread as inside it, so the hooks it reaches through ``super()`` pass through."""
        fetching = self._fetching
        timed = self._timed_next(original, nested_passes=False)

        def __next__(it: Any) -> Any:
            tid = _ident()
            if tid in fetching:  # a trial's batch from a loader of the same class: timed outside
                return original(it)
            fetching.add(tid)
            try:
                return timed(it)
            finally:
                fetching.discard(tid)

        __next__._supplyline_fetch = True  # type: ignore[attr-defined]  # a mark: this class is hooked already
        return __next__

    def _timed_next(self, original: Callable[[Any], Any], nested_passes: bool) -> Callable[[Any], Any]:
        hooks, clock, ctl, fetching = self, self.clock, self.ctl, self._fetching

        def __next__(it: Any) -> Any:
            if nested_passes and fetching and _ident() in fetching:  # an override's super().__next__()
                return original(it)
            lid = getattr(it, "_supplyline_loader_id", None) or id(it._dataset)
            t = _now()
            first = it._num_yielded == 0
            if first:
                t = hooks._iter_started.pop(lid, t)
            counted = clock.fetch_begin(lid, t)
            if counted and ctl.serve is not None:
                served = ctl.serve(it, original)
                if served is not PASS:
                    return served
            outer = clock.depth == 0
            if outer:
                clock.depth, clock.phase = 1, P.DATA_WAIT
            c0 = _cpu()
            delivered = False
            try:
                batch = original(it)
                delivered = True
            finally:
                if outer:
                    clock.depth, clock.phase = 0, None
                wait = _now() - t
                # The end-of-epoch fetch (StopIteration) is waited for but brings no batch.
                clock.add_fetch(counted, wait, _cpu() - c0, t if outer else -1.0, delivered)
            info = hooks.loaders.get(lid)
            if info is not None:
                info.batches_fetched += 1
                info.fetch_wait_s += wait
                if first:
                    info.first_batch_s.append(wait)
                if info.batch_bytes is None:
                    info.batch_bytes = batch_nbytes(batch)
            if counted:
                ctl.last_batch = batch
                if hooks.timeline is not None:
                    hooks.timeline.on_first_work()  # the step's first GPU work is queued next
            return batch

        return __next__

    # -- optimizer and backward ---------------------------------------------------------------
    def _hook_optimizers(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        clock, spans, loop = self.clock, self.eval_spans, self.loop_wait
        started: dict[int, float] = {}

        def pre(opt: Any, args: Any, kwargs: Any) -> None:
            _training_work_begins(clock, spans)
            started[id(opt)] = clock.enter(P.COMPUTE_HOOKED)

        def post(opt: Any, args: Any, kwargs: Any) -> None:
            clock.leave(P.COMPUTE_HOOKED, started.pop(id(opt), -1.0))
            self.maybe_patch_late()
            if self.timeline is not None:
                self.timeline.on_work_queued()  # the update's launches are queued: the step's last GPU work
            clock.update(id(opt))
            if clock.last_fetch_loader is None:
                loop.arm()  # no DataLoader: the time until the next forward builds the next batch

        h1, h2 = register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)
        self._undo.append(h1.remove)
        self._undo.append(h2.remove)

    def _wrap_optimizer_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock = self.clock

        def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
            # Known before its first step, so backward() calls of a first accumulated step are not updates.
            clock.has_optimizer = True
            original(opt, *args, **kwargs)

        return __init__

    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock, hooks, spans, loop = self.clock, self, self.eval_spans, self.loop_wait

        def backward(*args: Any, **kwargs: Any) -> Any:
            _training_work_begins(clock, spans)
            t = clock.enter(P.COMPUTE_HOOKED)
            try:
                return original(*args, **kwargs)
            finally:
                clock.leave(P.COMPUTE_HOOKED, t)
                if hooks.after_backward is not None and t >= 0:
                    clock.add_collective(hooks.after_backward())
                clock.update(0)
                if clock.last_fetch_loader is None and t >= 0:
                    loop.arm()  # an accumulated micro-batch's next batch is built from here too

        return backward

    # -- logging and checkpoints --------------------------------------------------------------
    def _wrap_phase(self, phase: str, count: bool = False) -> Callable[[Any], Any]:
        clock, hooks = self.clock, self

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                t = clock.enter(phase)
                if count and t >= 0:
                    hooks.logging_calls += 1
                try:
                    return original(*args, **kwargs)
                finally:
                    clock.leave(phase, t)

            wrapper.__name__ = getattr(original, "__name__", "wrapper")
            return wrapper

        return make

    # -- host-to-device copies (CUDA only) ----------------------------------------------------
    def _wrap_to(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock, stats = self.clock, self.transfers
        is_cuda_method = getattr(original, "__name__", "") == "cuda"

        def to(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if clock.depth or tensor.device.type != "cpu" or isinstance(tensor, torch.nn.Parameter):
                return original(tensor, *args, **kwargs)
            if not (is_cuda_method or targets_cuda(args, kwargs)):
                return original(tensor, *args, **kwargs)
            t = clock.enter(P.TRANSFER)
            try:
                return original(tensor, *args, **kwargs)
            finally:
                clock.leave(P.TRANSFER, t)
                if t >= 0:
                    nbytes = tensor.numel() * tensor.element_size()
                    stats.copies += 1
                    stats.bytes += nbytes
                    stats.seconds += _now() - t
                    clock.add_h2d(nbytes)
                    kind = classify_copy(tensor.is_pinned(), non_blocking_requested(args, kwargs, is_cuda_method))
                    stats.pinned += kind.pinned
                    stats.pageable += not kind.pinned
                    stats.non_blocking += kind.non_blocking
                    stats.blocking += not kind.non_blocking
                    stats.truly_async += kind.truly_async
                    stats.non_blocking_pageable += kind.non_blocking and not kind.pinned
                    stats.stream_syncs += kind.syncs_stream

        return to


def _training_work_begins(clock: StepClock, spans: EvalSpans) -> None:
    """A backward or an optimizer step starts: an open ``model.eval()`` span ends, and without a
    DataLoader the very first one opens the first step (two attribute reads on the hot path)."""
    if spans._eval_mode_started >= 0:
        spans.training_resumed()
    if clock.open_start is None:
        clock.open_before_first_update()


# (module, owner within it, attribute, kind): checkpoint APIs hooked once their module is imported.
def _in_webloader(stack: list[str]) -> bool:
    """Whether a DataLoader was first iterated by webdataset's pipeline (``WebLoader.__iter__``)."""
    return any(f"{os.sep}webdataset{os.sep}pipeline.py" in frame for frame in stack[:6])


_LATE_SAVE_APIS: tuple[tuple[str, str, str, str], ...] = (
    ("torch.distributed.checkpoint", "", "save", "dcp.save"),
    ("torch.distributed.checkpoint", "", "async_save", "dcp.async_save"),
    ("safetensors.torch", "", "save_file", "safetensors.save_file"),
    ("safetensors.torch", "", "save_model", "safetensors.save_model"),
    ("transformers.modeling_utils", "PreTrainedModel", "save_pretrained", "hf.save_pretrained"),
    ("transformers.trainer", "Trainer", "_save_checkpoint", "hf.trainer_checkpoint"),
    ("lightning.pytorch.trainer.trainer", "Trainer", "save_checkpoint", "lightning.save_checkpoint"),
    ("pytorch_lightning.trainer.trainer", "Trainer", "save_checkpoint", "lightning.save_checkpoint"),
    ("lightning.fabric.plugins.io.torch_io", "TorchCheckpointIO", "save_checkpoint", "lightning.checkpoint_io"),
)


def _resolve(module: Any, owner_path: str) -> Any:
    return getattr(module, owner_path, None) if owner_path else module


def _import_safetensors() -> None:
    """safetensors is small and often imported by name early (transformers binds ``save_file``)."""
    try:
        import safetensors.torch  # noqa: F401
    except Exception:  # not installed, or broken: its saves simply go unseen
        pass


def targets_cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does a ``Tensor.to(...)`` call move to a CUDA device? (Pure: tested on CPU.)"""
    candidates = [*args[:1], kwargs.get("device")]
    for a in candidates:
        if a is None or isinstance(a, bool):
            continue
        if isinstance(a, torch.device):
            return a.type == "cuda"
        if isinstance(a, str):
            return a.startswith("cuda")
        if isinstance(a, int):
            return True  # .to(0) means cuda:0
        if isinstance(a, torch.Tensor):
            return a.device.type == "cuda"
    return False


def non_blocking_requested(args: tuple[Any, ...], kwargs: dict[str, Any], cuda_method: bool = False) -> bool:
    """Did a ``Tensor.to(...)``/``.cuda(...)`` call ask for ``non_blocking``? Its position depends on
    the overload: ``cuda(device, non_blocking)``, ``to(dtype|tensor, non_blocking, copy)``,
    ``to(device, dtype, non_blocking, copy)``; the ``copy`` flag after it must not be read as it."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    first = args[0] if args else None
    index = 1 if cuda_method or isinstance(first, (torch.dtype, torch.Tensor)) else 2
    if not cuda_method and len(args) > 1 and isinstance(args[1], bool) and index == 2:
        index = 1  # to(device, True): torch's parser takes the bool as non_blocking
    return len(args) > index and args[index] is True


@dataclass(frozen=True)
class CopyKind:
    """What a host-to-device copy does on a real device (CUDA's and PyTorch's documented behaviour).

    - pinned + non_blocking: a DMA queued on the stream; the host returns at once (truly async).
    - pageable + non_blocking: the driver stages the bytes through a pinned buffer while the host
      waits, so the call takes about as long as a blocking one: asked for, not obtained.
    - blocking (either source): PyTorch synchronises the stream after the copy, so the host also
      waits for every kernel queued before it and loses any lead it had over the GPU.
    """

    pinned: bool
    non_blocking: bool

    @property
    def truly_async(self) -> bool:
        return self.pinned and self.non_blocking

    @property
    def syncs_stream(self) -> bool:
        return not self.non_blocking

    @property
    def label(self) -> str:
        if self.truly_async:
            return "pinned, async"
        source = "pinned" if self.pinned else "pageable"
        return f"{source}, blocking (syncs the stream)" if self.syncs_stream else "pageable, non_blocking but not async"


def classify_copy(pinned: bool, non_blocking: bool) -> CopyKind:
    return CopyKind(bool(pinned), bool(non_blocking))


def batch_nbytes(batch: Any, _depth: int = 0) -> int:
    """Bytes of the tensors in a batch (nested tuples, lists, dicts)."""
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if _depth > 4:
        return 0
    if isinstance(batch, dict):
        return sum(batch_nbytes(v, _depth + 1) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_nbytes(v, _depth + 1) for v in batch)
    return 0

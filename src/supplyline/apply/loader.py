"""DataLoader settings, applied where the loader is made.

``LoaderSettings.install()`` wraps ``DataLoader.__init__`` so that every training loader the script
constructs gets the new ``num_workers`` / ``prefetch_factor`` / ``persistent_workers`` /
``pin_memory``; everything else the script passed (dataset, batch size, sampler, batch sampler,
collate_fn, worker_init_fn, generator, ...) reaches torch untouched.

DataLoader subclasses with an ``__init__`` of their own that takes the same settings (torchdata's
``StatefulDataLoader``, which never calls ``DataLoader.__init__``) are patched the same way, those
defined before the install and those the script defines after it (``collect/loader_classes``).

Which loaders are training loaders is decided at construction, because that is when the setting
must be known:

- ``all``: every loader.
- ``train``: shuffled loaders only: ``shuffle=True``, a ``RandomSampler``/``SubsetRandomSampler``/
  ``WeightedRandomSampler``, or a ``DistributedSampler`` with ``shuffle=True`` (also as the
  sampler of a batch sampler).
- ``auto`` (the default): shuffled loaders, and unshuffled ones made before any shuffled loader
  exists. A script that builds ``train_loader`` (shuffled) and then ``val_loader`` (sequential)
  keeps its validation loader as it was; a script whose only loader is sequential is sped up.
"""

from __future__ import annotations

import inspect
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from supplyline.apply.dataset_state import dataset_for_new_loader, is_litdata_loader
from supplyline.collect.events import LOADER_KEYS
from supplyline.collect.loader_classes import overrides, takes_loader_settings, watch_subclasses
from supplyline.collect.patching import Patcher

RANDOM_SAMPLERS = ("RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler")
DEFAULTS: dict[str, Any] = {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False, "pin_memory": False}
_local = threading.local()  # construction depth, shared by every installed layer


def _layers(newest: Any, original: Any) -> tuple[list[Any], Any]:
    """Every installed LoaderSettings, newest first, and the real ``__init__`` under them all.

    Installs nest (a doctor trial inside ``supplyline run``); one construction applies each
    layer's settings in install order and settles the result for torch once.
    """
    layers = [newest]
    while hasattr(original, "_supplyline_layer"):
        layers.append(original._supplyline_layer)
        original = original.__wrapped__
    return layers, original


def _by_name(signature: inspect.Signature, loader: Any, args: Any, kwargs: Any) -> dict[str, Any] | None:
    """A constructor call's arguments by name (a subclass's ``**kwargs`` spread back into them), or
    None when it takes ``*args`` it was given: those cannot be passed by name."""
    arguments = dict(signature.bind(loader, *args, **kwargs).arguments)
    arguments.pop("self", None)
    for name, param in signature.parameters.items():
        if name not in arguments:
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(arguments.pop(name))
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            if arguments[name]:
                return None
            del arguments[name]
    return arguments


def is_shuffled(arguments: dict[str, Any]) -> bool:
    """Whether a loader built with these ``DataLoader(...)`` arguments draws samples in random order."""
    if arguments.get("shuffle"):
        return True
    for sampler in (arguments.get("sampler"), getattr(arguments.get("batch_sampler"), "sampler", None)):
        name = type(sampler).__name__
        if name in RANDOM_SAMPLERS or (name == "DistributedSampler" and getattr(sampler, "shuffle", False)):
            return True
    return False


def settle(arguments: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with ``settings`` laid over them, made legal for torch.

    Torch refuses ``prefetch_factor``, ``persistent_workers`` and a ``multiprocessing_context``
    without workers, so those are dropped when the result has none; a prefetch depth or
    persistence asked for in ``settings`` is kept only where workers exist.
    """
    merged = {**arguments, **settings}
    if int(merged.get("num_workers") or 0) == 0:
        merged["prefetch_factor"] = None
        merged["persistent_workers"] = False
        merged["multiprocessing_context"] = None
    return merged


@dataclass
class LoaderSettings:
    """Install once; every DataLoader made until ``uninstall()`` is judged and, if training, changed."""

    settings: dict[str, Any]
    apply_to: str = "auto"
    changed: list[dict[str, Any]] = field(default_factory=list)  # per changed loader: {key: (old, new)}
    kept: int = 0  # loaders judged not training and left as they were
    classes: list[str] = field(default_factory=list)  # per changed loader: its class name

    def __post_init__(self) -> None:
        from supplyline.apply.stateful import ResumeGuard

        self._patcher = Patcher()
        self._seen_shuffled = False
        self.resume = ResumeGuard()  # a changed StatefulDataLoader handed a state saved with other workers

    def install(self) -> LoaderSettings:
        from torch.utils.data import DataLoader

        self._patch_init(DataLoader)
        self._patcher._undo.append(watch_subclasses(self._patch_subclass))
        self.resume.install()
        self._patcher._undo.append(self.resume.uninstall)
        return self

    def _patch_subclass(self, cls: type) -> None:
        if takes_loader_settings(cls, LOADER_KEYS):
            self._patch_init(cls)

    def _patch_init(self, cls: type) -> None:
        signature = inspect.signature(cls.__init__)  # type: ignore[misc]  # a class's __init__, read not called
        this = self

        def make(original: Any) -> Any:
            def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
                # A subclass's __init__ calling super().__init__ reaches here once; a loader built
                # inside another loader's construction is left as it is made.
                if getattr(_local, "depth", 0):
                    return original(loader, *args, **kwargs)
                layers, real = _layers(this, original)
                _local.depth = 1
                try:
                    arguments = _by_name(signature, loader, args, kwargs)
                    if arguments is None:  # extra positional arguments: left as they are
                        return real(loader, *args, **kwargs)
                    own = settle(arguments, {})
                    for layer in reversed(layers):  # the newest install has the last word
                        arguments = layer._adjust(arguments, type(loader).__name__)
                    settled = settle(arguments, {})
                    real(loader, **settled)
                    if any(own.get(k, DEFAULTS[k]) != settled.get(k, DEFAULTS[k]) for k in LOADER_KEYS):
                        this.resume.originals[loader] = {k: own.get(k, DEFAULTS[k]) for k in LOADER_KEYS}
                finally:
                    _local.depth = 0

            __init__._supplyline_layer = this  # type: ignore[attr-defined]  # a mark on the function object
            return __init__

        self._patcher._patch(cls, "__init__", make)

    def uninstall(self) -> None:
        self._patcher.uninstall()

    def is_training(self, arguments: dict[str, Any]) -> bool:
        shuffled = is_shuffled(arguments)
        if self.apply_to == "all":
            return True
        if self.apply_to == "train":
            return shuffled
        return shuffled or not self._seen_shuffled

    def _adjust(self, arguments: dict[str, Any], kind: str = "DataLoader") -> dict[str, Any]:
        training = self.is_training(arguments)
        self._seen_shuffled = self._seen_shuffled or is_shuffled(arguments)
        if not training:
            self.kept += 1
            return arguments
        defaults = DEFAULTS
        before = {key: arguments.get(key, defaults[key]) for key in defaults}
        settled = {**arguments, **self.settings}
        after = {key: settled.get(key, defaults[key]) for key in defaults}
        self.changed.append({k: (before[k], after[k]) for k in defaults if before[k] != after[k]})
        self.classes.append(kind)
        return settled

    def summary(self) -> str:
        """``1 DataLoader changed (num_workers 0→2), 1 kept``: for the closing line."""
        if not self.changed and not self.kept:
            if "torchdata.nodes.loader" in sys.modules:  # the script built a nodes pipeline instead
                return (
                    "no DataLoader was made: the job loads through a torchdata.nodes pipeline, whose workers are "
                    "its ParallelMapper's num_workers and method; set them where the script builds it"
                )
            return (
                "no DataLoader was made, so nothing changed: if the script builds its batches itself (a "
                "get_batch function), move that into a DataLoader by hand, as `supplyline doctor` shows"
            )
        parts = []
        if self.changed:
            diffs = sorted({f"{k} {old}→{new}" for change in self.changed for k, (old, new) in change.items()})
            kinds = "/".join(sorted(set(self.classes))) or "DataLoader"
            parts.append(f"{len(self.changed)} {kinds}(s) changed" + (f" ({', '.join(diffs)})" if diffs else ""))
        if self.kept:
            parts.append(f"{self.kept} kept as made (not a training loader)")
        if self.resume.restored:
            parts.append(f"{self.resume.restored} back to the script's settings to load its saved state")
        return ", ".join(parts)


def rebuild_loader(loader: Any, settings: dict[str, Any]) -> Any:
    """A new loader of ``loader``'s own class over its dataset, sampler / batch sampler, collate_fn,
    worker init and generator, with ``settings`` (num_workers, prefetch_factor, ...) laid over its own.

    The sampler object is shared, not copied: a random sampler goes on drawing from its own
    generator, so the rebuilt loader's order differs from the one the old loader would have
    produced next only in where the epoch is cut. A subclass whose ``__init__`` takes the loader
    settings (torchdata's ``StatefulDataLoader``) is rebuilt as itself, with its own extra arguments
    read back from the loader (``snapshot_every_n_steps``), so it keeps ``state_dict()``; any other
    subclass is rebuilt as a plain ``DataLoader``.
    """
    from torch.utils.data import DataLoader, IterableDataset

    cls = type(loader)
    if cls is not DataLoader and overrides(cls, "__init__") and not takes_loader_settings(cls, LOADER_KEYS):
        cls = DataLoader
    arguments: dict[str, Any] = {
        "collate_fn": loader.collate_fn,
        "worker_init_fn": loader.worker_init_fn,
        "generator": loader.generator,
        "timeout": loader.timeout,
        "num_workers": loader.num_workers,
        "prefetch_factor": loader.prefetch_factor,
        "persistent_workers": loader.persistent_workers,
        "pin_memory": loader.pin_memory,
        "multiprocessing_context": loader.multiprocessing_context,
    }
    for name in ("pin_memory_device", "in_order", *_own_arguments(cls)):
        if hasattr(loader, name):
            arguments[name] = getattr(loader, name)
    if isinstance(loader.dataset, IterableDataset):
        arguments.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_size is not None:  # torch made the batch sampler from these
        arguments.update(batch_size=loader.batch_size, drop_last=loader.drop_last, sampler=loader.sampler)
    elif loader.batch_sampler is not None:  # the user's own batch sampler: batch_size stays unset
        arguments.update(batch_sampler=loader.batch_sampler)
    else:  # batch_size=None: no automatic batching
        arguments.update(batch_size=None, sampler=loader.sampler)
    dataset = dataset_for_new_loader(loader)  # litdata and Mosaic keep iteration state on it
    if is_litdata_loader(loader):
        # litdata's collate function is the script loader's, unwrapped from the wrapper its
        # __init__ adds again.
        inner = getattr(arguments["collate_fn"], "collate_fn", None)
        if type(arguments["collate_fn"]).__name__ == "StreamingDataLoaderCollateFn" and callable(inner):
            arguments["collate_fn"] = inner
    return cls(dataset, **settle(arguments, settings))


def _own_arguments(cls: type) -> list[str]:
    """The ``__init__`` arguments a DataLoader subclass adds to DataLoader's (StatefulDataLoader's
    ``snapshot_every_n_steps``): read back from the loader by the same name, where it keeps them."""
    from torch.utils.data import DataLoader

    if cls is DataLoader:
        return []
    try:
        base = inspect.signature(DataLoader.__init__).parameters
        own = inspect.signature(cls.__init__).parameters  # type: ignore[misc]  # read, not called
    except (TypeError, ValueError):
        return []
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [name for name, p in own.items() if name not in base and name != "self" and p.kind in named]

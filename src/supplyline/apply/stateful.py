"""Resuming a StatefulDataLoader whose worker count ``supplyline run --apply`` changed.

torchdata 0.11.0 keeps a loader's state in one of two shapes: with ``num_workers=0`` the batch
count sits at the top (``_num_yielded``); with workers it sits in a ``_snapshot`` that also records
the worker count, and the iterator asserts that count equals its own. A state the script saved in a
run without ``--apply`` therefore does not load into a loader ``--apply`` gave other workers: the
job would crash at its next ``iter(loader)``. So when a changed loader is handed a state made with
the worker count the script itself asked for, that loader goes back to the script's own settings
(one line says so) and resumes where it stood; the speed-up is given up, the job is not harmed.

A state in a shape this module does not know is passed through untouched.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from supplyline.collect.loader_classes import overrides, watch_subclasses
from supplyline.collect.patching import Patcher

STATEFUL_MODULE = "torchdata.stateful_dataloader"


def saved_workers(state: Any) -> int | None:
    """The worker count a StatefulDataLoader state was saved with, or None for an unknown shape."""
    if not isinstance(state, dict):
        return None
    snapshot = state.get("_snapshot")
    if isinstance(snapshot, dict):
        main = snapshot.get("_main_snapshot")
        workers = main.get("_num_workers") if isinstance(main, dict) else None
        return workers if isinstance(workers, int) else None
    return 0 if "_num_yielded" in state else None


class ResumeGuard:
    """Patches ``load_state_dict`` of torchdata's StatefulDataLoader (now, or once the script
    imports it) while ``supplyline run --apply`` runs; ``originals`` maps each loader the settings
    changed to the settings the script gave it."""

    def __init__(self) -> None:
        self.originals: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        self.restored = 0
        self._patcher = Patcher()

    def install(self) -> ResumeGuard:
        self._patcher._undo.append(watch_subclasses(self._patch_class))
        return self

    def uninstall(self) -> None:
        self._patcher.uninstall()

    def _patch_class(self, cls: type) -> None:
        if overrides(cls, "load_state_dict") and cls.__module__.startswith(STATEFUL_MODULE):
            self._patcher._patch(cls, "load_state_dict", self._wrap)

    def _wrap(self, original: Any) -> Any:
        guard = self

        def load_state_dict(loader: Any, state_dict: Any) -> Any:
            try:
                guard._maybe_restore(loader, state_dict)
            except Exception:  # never in the way of the script's own call
                pass
            return original(loader, state_dict)

        return load_state_dict

    def _maybe_restore(self, loader: Any, state: Any) -> None:
        own = self.originals.get(loader)
        saved = saved_workers(state)
        if own is None or saved is None or saved == loader.num_workers or saved != own["num_workers"]:
            return
        changed = loader.num_workers
        for key, value in own.items():
            # DataLoader refuses some of these once made (persistent_workers): set past its __setattr__.
            object.__setattr__(loader, key, value)
        del self.originals[loader]
        self.restored += 1
        stream = sys.__stderr__ or sys.stderr
        stream.write(
            f"supplyline run: this {type(loader).__name__}'s saved state was made with num_workers={saved}, and "
            f"torchdata loads a state only into a loader with as many workers: it keeps the script's own "
            f"settings (num_workers={saved}, not {changed}) so that it resumes where it stood\n"
        )
        stream.flush()

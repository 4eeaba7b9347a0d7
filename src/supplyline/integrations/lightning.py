"""Lightning: ``Trainer(callbacks=[SupplylineCallback(out="supplyline-report")])``.

Produces the same record and report as ``supplyline doctor``, with Lightning's own step
boundaries (one step = one ``on_train_batch_end``). Validation and sanity checks are kept out of
the steps. Lightning is optional: importing this module without it raises an ImportError that says so.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    try:
        from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]  # same class, older package name
    except ImportError as exc:
        raise ImportError("supplyline.integrations.lightning needs Lightning: pip install lightning") from exc

from supplyline.integrations._core import CallbackCore


class SupplylineCallback(Callback):
    """Diagnose the input pipeline of a Lightning run.

    out: report directory (record.json, report.json, report.html, trace.json).
    steps: ask the Trainer to stop after this many training steps (``trainer.should_stop``).
    quiet: write the files without printing the summary.
    """

    def __init__(self, out: str = "supplyline-report", steps: int | None = None, quiet: bool = False) -> None:
        super().__init__()
        self.core = CallbackCore("Lightning", out, steps, quiet)

    @property
    def record(self) -> Any:
        return self.core.record

    @property
    def report(self) -> Any:
        return self.core.report

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        # Before Lightning creates the DataLoader iterators, so the hooks see the loaders' settings.
        if stage == "fit":
            self.core.begin()

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.core.begin()  # no-op when setup already began

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.core.pause()  # whatever ran before the first batch (sanity check, set-up) is not a step

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.core.boundary():
            trainer.should_stop = True

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self.core.pause()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.core.pause()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.core.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.core.end(exception)

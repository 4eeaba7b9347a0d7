"""Hugging Face: ``Trainer(..., callbacks=[SupplylineCallback(out="supplyline-report")])``.

Produces the same record and report as ``supplyline doctor``, with the Trainer's own step
boundaries (one step = one optimizer update, ``on_step_end``; gradient-accumulation micro-batches
belong to their update). Evaluation is kept out of the steps. transformers is optional: importing
this module without it raises an ImportError that says so.
"""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:
    raise ImportError("supplyline.integrations.transformers needs transformers: pip install transformers") from exc

from supplyline.integrations._core import CallbackCore


class SupplylineCallback(TrainerCallback):
    """Diagnose the input pipeline of a Hugging Face Trainer run.

    out: report directory (record.json, report.json, report.html, trace.json).
    steps: ask the Trainer to stop after this many optimizer steps (``control.should_training_stop``).
    quiet: write the files without printing the summary.
    """

    def __init__(self, out: str = "supplyline-report", steps: int | None = None, quiet: bool = False) -> None:
        self.core = CallbackCore("Hugging Face Trainer", out, steps, quiet)

    @property
    def record(self) -> Any:
        return self.core.record

    @property
    def report(self) -> Any:
        return self.core.report

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.core.begin()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.core.pause()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.core.boundary():
            control.should_training_stop = True
        return control

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.core.pause()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.core.end()

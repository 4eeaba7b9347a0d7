"""Log every N steps (or every S seconds) with a running mean that does not stall the GPU.

``loss.item()`` on every step makes the CPU wait for the GPU to finish that step (a host-device
sync), which removes the overlap between queuing step k+1 and running step k. ``every`` keeps the
sum on the tensor's own device (``detach()`` + in-place add, no sync) and calls ``.item()`` once,
when it fires:

    log_every = every(n_steps=100)
    for step, batch in enumerate(loader):
        loss = train_step(batch)
        if log_every(loss):
            logger.info("step %d loss %.4f", step, log_every.mean)
"""

from __future__ import annotations

import time

import torch

from supplyline.errors import UserError

Number = int | float


class Every:
    """Fires every ``n_steps`` calls and/or every ``seconds`` seconds, whichever comes first."""

    def __init__(self, n_steps: int | None = None, seconds: float | None = None) -> None:
        if n_steps is None and seconds is None:
            raise UserError("every: give n_steps=, seconds= or both")
        if n_steps is not None and n_steps < 1:
            raise UserError(f"every: n_steps must be at least 1, got {n_steps}")
        if seconds is not None and seconds <= 0:
            raise UserError(f"every: seconds must be positive, got {seconds}")
        self.n_steps = n_steps
        self.seconds = seconds
        self.mean: float | None = None
        """Mean of the values passed since the previous firing; set when the call returns True."""
        self.values_in_mean = 0
        """How many values ``mean`` averages (values passed in the window that just fired)."""
        self._sum: torch.Tensor | float | None = None
        self._values = 0
        self._steps_in_window = 0
        self._window_start = time.monotonic()

    def __call__(self, value: torch.Tensor | Number | None = None) -> bool:
        """Count one step (accumulating ``value`` if given); True when it is time to log."""
        if value is not None:
            self._accumulate(value)
        self._steps_in_window += 1
        if not self._due():
            return False
        self._fire()
        return True

    def _accumulate(self, value: torch.Tensor | Number) -> None:
        if isinstance(value, torch.Tensor):
            # float32 sum: a bf16/fp16 running sum loses precision within a few hundred steps.
            detached = value.detach()
            if self._sum is None or not isinstance(self._sum, torch.Tensor):
                start = detached.to(torch.float32, copy=True)
                self._sum = start if self._sum is None else start.add_(self._sum)
            else:
                self._sum.add_(detached)
        else:
            self._sum = float(value) if self._sum is None else self._sum + float(value)
        self._values += 1

    def _due(self) -> bool:
        if self.n_steps is not None and self._steps_in_window >= self.n_steps:
            return True
        return self.seconds is not None and time.monotonic() - self._window_start >= self.seconds

    def _fire(self) -> None:
        total = self._sum
        if total is None:
            self.mean = None
        else:
            # The one host-device sync per window, and only when a value was given.
            value = total.mean() if isinstance(total, torch.Tensor) and total.numel() > 1 else total
            self.mean = (float(value.item()) if isinstance(value, torch.Tensor) else float(value)) / self._values
        self.values_in_mean = self._values
        self._sum = None
        self._values = 0
        self._steps_in_window = 0
        self._window_start = time.monotonic()


def every(n_steps: int | None = None, seconds: float | None = None) -> Every:
    """A trigger for "log every N steps or S seconds" with an on-device running mean; see ``Every``."""
    return Every(n_steps=n_steps, seconds=seconds)

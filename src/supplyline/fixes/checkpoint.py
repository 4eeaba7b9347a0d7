"""Checkpoints that do not stop training: copy the state to CPU memory on the call, write it on a
background thread, publish it atomically.

    from supplyline.fixes import AsyncCheckpointer
    ckpt = AsyncCheckpointer("checkpoints", keep_last=3, every_steps=1000)
    ...
        ckpt.maybe_save({"model": model.state_dict(), "optim": opt.state_dict()}, step=step)

Guarantees: the saved state is the state at the call, even though training changes the
weights while the file is written; ``latest`` only ever names a complete, fsync'ed checkpoint
(a crash or SIGKILL at any moment leaves the previous one); at most one save is in flight;
a failed write (a full disk) is reported once and the previous checkpoint stays ``latest``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

from supplyline.errors import UserError
from supplyline.fixes import _ckpt_files as files
from supplyline.fixes import _dcp, _exit
from supplyline.fixes._snapshot import snapshot_to_cpu, tensor_bytes

log = logging.getLogger("supplyline.fixes")

State = dict[str, Any]


class AsyncCheckpointer:
    """Background, atomic, pruned checkpoints in ``directory``; see the module docstring.

    ``every_steps``/``every_seconds``/``on_improvement`` ("min" or "max" of the metric) decide
    when ``maybe_save`` saves (any one firing is enough; none given: every call). ``policy``:
    what ``save`` does while the previous save is still writing: "wait" for it, or "skip" this
    one. ``on_error``: "raise" a UserError at the next save/maybe_save/wait/close after a failed
    write, or "warn" (log it once, never raise). Under torch.distributed it writes with
    ``torch.distributed.checkpoint.async_save`` and always waits, so that ranks stay in step.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        keep_last: int = 3,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        on_improvement: Literal["min", "max"] | None = None,
        policy: Literal["wait", "skip"] = "wait",
        on_error: Literal["raise", "warn"] = "raise",
        prefix: str = "ckpt",
    ) -> None:
        _validate(keep_last, every_steps, every_seconds, on_improvement, policy, on_error)
        self.directory = os.path.abspath(os.fspath(directory))
        self.keep_last, self.every_steps, self.every_seconds = keep_last, every_steps, every_seconds
        self.on_improvement, self.policy, self.on_error, self.prefix = on_improvement, policy, on_error, prefix
        self.saves_started = 0
        self.saves_skipped = 0
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise UserError(f"AsyncCheckpointer: cannot create {self.directory}: {exc.strerror}") from exc
        self._group = _dcp.checkpoint_group() if _dcp.distributed_active() else None
        self._coordinator = self._group is None or _dcp.is_coordinator(self._group)
        if self._coordinator:
            files.remove_stale_temps(self.directory, prefix)
        if self._group is not None:
            _dcp.barrier(self._group)  # no rank starts writing before rank 0 has cleaned up
        best = files.read_pointer(self.directory, "best") if on_improvement else None
        self._best: float | None = best.get("metric") if best else None
        self._last_save_time = time.monotonic()
        self._thread: threading.Thread | None = None
        self._error: str | None = None
        self._closed = False
        _exit.register(self._at_exit)

    # -- deciding -------------------------------------------------------------------------
    def due(self, step: int, metric: float | None = None) -> bool:
        """Whether ``maybe_save`` would save at this step (on this rank's own view)."""
        if self.every_steps is None and self.every_seconds is None and self.on_improvement is None:
            return True
        if self.every_steps is not None and step % self.every_steps == 0:
            return True
        if self.every_seconds is not None and time.monotonic() - self._last_save_time >= self.every_seconds:
            return True
        return self._improves(metric)

    def maybe_save(self, state: State | Callable[[], State], step: int, metric: float | None = None) -> bool:
        """Save if a trigger fires; ``state`` may be a function, called only then. True if started."""
        if self.on_improvement is not None and metric is None:
            raise UserError("AsyncCheckpointer: on_improvement is set, so maybe_save needs metric=")
        decision = self.due(step, metric)
        if self._group is not None and (self.every_seconds is not None or self.on_improvement is not None):
            decision = _dcp.agree(decision, self._group)
        return self.save(state, step, metric) if decision else False

    def _improves(self, metric: float | None) -> bool:
        if self.on_improvement is None or metric is None:
            return False
        if self._best is None:
            return True
        return metric < self._best if self.on_improvement == "min" else metric > self._best

    # -- saving ---------------------------------------------------------------------------
    def save(self, state: State | Callable[[], State], step: int, metric: float | None = None) -> bool:
        """Snapshot ``state`` now and write it in the background. False if skipped by policy."""
        if self._closed:
            raise UserError(f"AsyncCheckpointer({self.directory}) is closed; create a new one to save")
        self._raise_pending_error()
        if self._busy():
            if self.policy == "skip" and self._group is None:
                self.saves_skipped += 1
                return False
            self._join()
            self._raise_pending_error()
        if callable(state):
            state = state()
        improved = self._improves(metric)
        previous_best = self._best
        if improved:
            self._best = metric
        self._last_save_time = time.monotonic()
        if self._group is None:
            job = self._torch_job(snapshot_to_cpu(state), step, metric, improved)
        else:
            job = self._dcp_job(state, step, metric, improved)
        size = tensor_bytes(state)
        self._thread = threading.Thread(
            target=self._run, args=(job, step, size, improved, previous_best), name=f"supplyline-checkpoint-{step}"
        )
        self._thread.start()
        self.saves_started += 1
        return True

    def _torch_job(self, snapshot: Any, step: int, metric: float | None, improved: bool) -> Callable[[], None]:
        name = files.checkpoint_name(self.prefix, step, files.TORCH_FORMAT)

        def job() -> None:
            files.write_torch_file(snapshot, self.directory, name)
            self._publish(name, step, metric, improved, files.TORCH_FORMAT)

        return job

    def _dcp_job(self, state: State, step: int, metric: float | None, improved: bool) -> Callable[[], None]:
        name = files.checkpoint_name(self.prefix, step, files.DCP_FORMAT)
        temp_dir = files.temp_path(self.directory, name, _dcp.DCP_TEMP_TAG)
        future = _dcp.start_save(state, temp_dir, self._group)  # stages the copy before returning

        def job() -> None:
            final_dir = os.path.join(self.directory, name)
            if self._coordinator and os.path.exists(final_dir):
                files.remove_path(final_dir)  # a rerun of the same step; os.replace needs it gone
            _dcp.finish_save(future, temp_dir, final_dir, self._coordinator)
            if self._coordinator:
                self._publish(name, step, metric, improved, files.DCP_FORMAT)

        return job

    def _publish(self, name: str, step: int, metric: float | None, improved: bool, fmt: str) -> None:
        try:
            files.publish(self.directory, "latest", name, step, metric, fmt)
        except BaseException:
            # Not published means not a checkpoint: free the space the full disk needs.
            files.remove_path(os.path.join(self.directory, name))
            raise
        if improved:
            files.publish(self.directory, "best", name, step, metric, fmt)
        files.prune(self.directory, self.prefix, self.keep_last)

    def _run(self, job: Callable[[], None], step: int, size: int, improved: bool, previous_best: float | None) -> None:
        try:
            job()
        except BaseException as exc:
            if improved:
                self._best = previous_best
            message = files.describe_write_error(exc, self.directory, step, size)
            latest = files.read_pointer(self.directory) if self._coordinator else None
            if latest:
                message += f"; {latest['name']} (step {latest['step']}) is still the latest checkpoint"
            if self.on_error == "warn":
                log.error("%s", message)
            else:
                self._error = message

    # -- waiting and closing --------------------------------------------------------------
    def _busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _raise_pending_error(self) -> None:
        message, self._error = self._error, None
        if message is not None:
            raise UserError(message)

    def wait(self) -> None:
        """Block until the save in flight is on disk; raise its error (on_error="raise")."""
        self._join()
        self._raise_pending_error()

    def close(self) -> None:
        """Wait for the last save and stop; further saves raise. Called for you at exit."""
        if self._closed:
            return
        self._closed = True
        _exit.unregister(self._at_exit)
        self.wait()

    def _at_exit(self) -> None:
        """Wait for the save in flight and report its error; does not close, since after a
        SIGTERM the program's own handler may still save a last checkpoint."""
        self._join()
        message, self._error = self._error, None
        if message is not None:
            log.error("%s", message)
            if not logging.getLogger().handlers:
                os.write(2, f"supplyline: {message}\n".encode())
            # A pipeline must not believe the final checkpoint exists: the process fails.
            _exit.fail_exit(message)

    def __enter__(self) -> AsyncCheckpointer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:  # do not hide the user's exception behind a checkpoint error
            self._closed = True
            _exit.unregister(self._at_exit)
            self._at_exit()


def _validate(
    keep_last: int,
    every_steps: int | None,
    every_seconds: float | None,
    on_improvement: str | None,
    policy: str,
    on_error: str,
) -> None:
    if keep_last < 1:
        raise UserError(f"AsyncCheckpointer: keep_last must be at least 1, got {keep_last}")
    if every_steps is not None and every_steps < 1:
        raise UserError(f"AsyncCheckpointer: every_steps must be at least 1, got {every_steps}")
    if every_seconds is not None and every_seconds <= 0:
        raise UserError(f"AsyncCheckpointer: every_seconds must be positive, got {every_seconds}")
    for name, value, allowed in (
        ("on_improvement", on_improvement, (None, "min", "max")),
        ("policy", policy, ("wait", "skip")),
        ("on_error", on_error, ("raise", "warn")),
    ):
        if value not in allowed:
            raise UserError(f"AsyncCheckpointer: {name} must be one of {allowed}, got {value!r}")


def load_latest(
    directory: str | os.PathLike[str], map_location: Any = "cpu", weights_only: bool = True, into: State | None = None
) -> files.Checkpoint | None:
    """The checkpoint ``latest`` names in ``directory`` (state, step, metric, path), or None."""
    return files.load_latest(os.fspath(directory), map_location=map_location, weights_only=weights_only, into=into)

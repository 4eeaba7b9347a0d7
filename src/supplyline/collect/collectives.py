"""Time blocked in collectives: DDP's gradient all-reduce and direct ``torch.distributed`` calls.

Two measurements, both taken, none guessed:

- DDP: every ``DistributedDataParallel`` gets a communication hook that wraps the all-reduce DDP
  would run anyway (``default_hooks.allreduce_hook``, or the user's own hook if they register one
  later). It stamps when each gradient bucket is handed to the network and when its future
  completes. DDP waits for every bucket before ``backward()`` returns, so the time the training
  thread was *blocked* is ``last completion - last launch``: the buckets launched earlier overlap
  with the rest of the backward and cost nothing. The backward hook moves that time from compute
  to the ``collective`` phase.
- Direct calls (``all_reduce``, ``barrier``, ``all_gather``... with ``async_op=False``) on the
  training thread are timed as a ``collective`` phase like the other hooked phases.

On CUDA with NCCL the host does not block in the all-reduce (the GPU stream does), so the host-side
stamps measure the launch only; the record notes it (docs/distributed.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from supplyline import phases as P
from supplyline.collect.patching import Patcher
from supplyline.collect.steps import StepClock

_now = time.perf_counter
_all_reduce = dist.all_reduce  # bound before CollectiveHooks wraps it: DDP's own all-reduce is timed per bucket

# Synchronous collectives a training loop calls directly (metrics, early-stop flags, barriers).
DIRECT_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "monitored_barrier",
)


class BucketTimer:
    """Launch and completion stamps of the gradient buckets of the backward in progress."""

    def __init__(self) -> None:
        self.launches: list[float] = []
        self.completions: list[float] = []  # appended from the thread that completes the future
        self.allreduces = 0
        self.blocked_total_s = 0.0
        self.cuda_seen = False
        self._lock = threading.Lock()

    def launched(self) -> None:
        self.launches.append(_now())
        self.allreduces += 1

    def completed(self) -> None:
        with self._lock:
            self.completions.append(_now())

    def take_blocked(self) -> float:
        """Seconds the last backward waited for its gradient all-reduce; resets for the next one."""
        with self._lock:
            launches, completions = self.launches, self.completions
            self.launches, self.completions = [], []
        if not launches or not completions:
            return 0.0
        blocked = max(0.0, max(completions) - max(launches))
        self.blocked_total_s += blocked
        return blocked


class TimedCommHook:
    """DDP's state for ``timed_allreduce``: the process group, and the user's own hook if they register one."""

    def __init__(self, timer: BucketTimer, state: Any) -> None:
        self.timer = timer
        self.inner: Callable[[Any, Any], Any] | None = None  # None: DDP's default all-reduce, inlined below
        self.state = state


def timed_allreduce(timed, bucket):
    """The hook DDP calls per gradient bucket. Unannotated on purpose: DDP checks annotations
    against the real types, and ``from __future__ import annotations`` would make them strings.

    The default case does what ``default_hooks.allreduce_hook`` does (average, all-reduce) with one
    Python callback instead of two: the callback is the completion stamp.
    """
    timer = timed.timer
    buffer = bucket.buffer()
    if buffer.is_cuda:
        timer.cuda_seen = True
    timer.launched()
    if timed.inner is not None:

        def stamp_user(done):
            timer.completed()
            return done.value()

        return timed.inner(timed.state, bucket).then(stamp_user)
    group = timed.state if timed.state is not None else dist.group.WORLD
    buffer.div_(group.size())
    fut = _all_reduce(buffer, group=group, async_op=True).get_future()

    def stamp(done):
        timer.completed()
        return done.value()[0]

    return fut.then(stamp)


class CollectiveHooks(Patcher):
    """Patches DDP and the direct collectives; ``uninstall`` restores them."""

    def __init__(self, clock: StepClock) -> None:
        super().__init__()
        self.clock = clock
        self.timer = BucketTimer()
        self.ddp_models = 0
        self.user_comm_hooks: list[str] = []
        self.direct_calls = 0
        self.notes: list[str] = []
        self._register: Callable[..., Any] | None = None

    def install(self) -> None:
        if not dist.is_available():
            return
        from torch.nn.parallel import DistributedDataParallel as DDP

        self._register = DDP.register_comm_hook  # the real one, for our own hook
        self._patch(DDP, "__init__", self._wrap_ddp_init)
        self._patch(DDP, "register_comm_hook", self._wrap_register)
        self._patch(DDP, "_register_builtin_comm_hook", self._wrap_register_builtin)
        for name in DIRECT_COLLECTIVES:
            if hasattr(dist, name):
                self._patch(dist, name, self._wrap_direct)

    def take_blocked(self) -> float:
        return self.timer.take_blocked()

    def summary(self) -> dict[str, Any]:
        return {
            "ddp_models": self.ddp_models,
            "bucket_allreduces": self.timer.allreduces,
            "allreduce_blocked_s": self.timer.blocked_total_s,
            "direct_calls": self.direct_calls,
            "user_comm_hooks": self.user_comm_hooks,
            "cuda_buckets": self.timer.cuda_seen,
        }

    # -- DDP ----------------------------------------------------------------------------------
    def _wrap_ddp_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def __init__(ddp: Any, *args: Any, **kwargs: Any) -> None:
            original(ddp, *args, **kwargs)
            try:
                timed = TimedCommHook(hooks.timer, ddp.process_group)
                register = hooks._register
                assert register is not None  # set by install() before this patch exists
                register(ddp, timed, timed_allreduce)
                ddp._supplyline_comm_hook = timed
                hooks.ddp_models += 1
            except Exception as exc:  # DDP variants without a reducer: no all-reduce time, the job runs on
                hooks.notes.append(f"DDP all-reduce not timed: {type(exc).__name__}: {exc}")

        return __init__

    def _wrap_register(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def register_comm_hook(ddp: Any, state: object, hook: Callable[..., Any]) -> None:
            timed = getattr(ddp, "_supplyline_comm_hook", None)
            if timed is None:
                return original(ddp, state, hook)
            # DDP takes one hook per model and ours is in: the user's hook runs inside it, timed.
            timed.inner, timed.state = hook, state
            hooks.user_comm_hooks.append(getattr(hook, "__qualname__", repr(hook)))
            return None

        return register_comm_hook

    def _wrap_register_builtin(self, original: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        def _register_builtin_comm_hook(ddp: Any, comm_hook_type: Any) -> None:
            timed = getattr(ddp, "_supplyline_comm_hook", None)
            if timed is None:
                return original(ddp, comm_hook_type)
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            python_twin = {
                "ALLREDUCE": default_hooks.allreduce_hook,
                "FP16_COMPRESS": default_hooks.fp16_compress_hook,
            }.get(getattr(comm_hook_type, "name", ""))
            if python_twin is None:
                hooks.notes.append(f"built-in comm hook {comm_hook_type} replaced by a timed all-reduce")
                python_twin = default_hooks.allreduce_hook
            timed.inner, timed.state = python_twin, ddp.process_group
            hooks.user_comm_hooks.append(str(comm_hook_type))
            return None

        return _register_builtin_comm_hook

    # -- direct collectives -------------------------------------------------------------------
    def _wrap_direct(self, original: Callable[..., Any]) -> Callable[..., Any]:
        clock, hooks = self.clock, self

        def collective(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("async_op"):
                return original(*args, **kwargs)  # returns a Work at once; its wait() is the user's
            t = clock.enter(P.COLLECTIVE)
            if t >= 0:
                hooks.direct_calls += 1
            try:
                return original(*args, **kwargs)
            finally:
                clock.leave(P.COLLECTIVE, t)

        collective.__name__ = getattr(original, "__name__", "collective")
        return collective

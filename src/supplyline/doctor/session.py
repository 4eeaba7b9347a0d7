"""A doctor session: hooks + stack sampler + host monitor around a training job, ending in a RunRecord.

The session never harms the job: every piece that can fail on an odd machine (the monitor, NVML,
the sampler) degrades to a note in the record, and the hooks are always uninstalled.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil
import torch

from supplyline import phases as P
from supplyline.collect.collectives import CollectiveHooks
from supplyline.collect.cuda_sync import SyncCounter
from supplyline.collect.events import (
    GpuTimeline,
    HostInterval,
    LineSample,
    LoaderInfo,
    MonitorInfo,
    SamplerInfo,
    SyncPoint,
    TrialsInfo,
    is_loop,
)
from supplyline.collect.stack_sampler import StackSampler
from supplyline.collect.steps import StepClock
from supplyline.collect.torch_hooks import Controller, TorchHooks
from supplyline.doctor import trial_crash
from supplyline.doctor.options import DoctorOptions
from supplyline.doctor.ranks import RankInfo
from supplyline.doctor.schedule import Mode, Schedule
from supplyline.doctor.trials import LOADER_FIXES, TRIAL_LABEL, TrialRunner, plan_trials, save_period
from supplyline.launch import Outcome, StopTraining
from supplyline.record import HostInfo, OutcomeInfo, RunRecord, TargetInfo, WhatIfInfo, new_version_fields


class DoctorSession:
    def __init__(
        self,
        target: TargetInfo,
        out_dir: str,
        options: DoctorOptions | None = None,
        rank: RankInfo | None = None,
        timeline: Any = None,
    ) -> None:
        o = options if options is not None else DoctorOptions()
        self.options = o
        self.target = target
        self.out_dir = out_dir
        self.ctl = Controller()
        self.clock = StepClock(on_step_closed=self._on_step_closed)
        self.hooks = TorchHooks(self.clock, self.ctl)
        self.schedule = Schedule(self.ctl, self.clock, self._drain)
        self.collectives = CollectiveHooks(self.clock)
        self.rank = rank  # torchrun's view of this process (doctor/ranks.py), None for one process
        self.sampler = StackSampler(self.clock, o.sampler_interval_s)
        self.syncs = SyncCounter(self.sampler.is_user_file)
        self.monitor: Any = None
        self.notes: list[str] = []
        self.whatif = WhatIfInfo(enabled=o.what_if, ran=False, note="", steps_requested=o.what_if_steps)
        self.observed_steps: int | None = None
        self.trials = TrialsInfo(enabled=o.trials, steps_requested=o.try_steps)
        self.trial = TrialRunner(self.trials)
        self._before_trial: tuple[int, int] | None = None  # saves and logging calls seen when the trial began
        self.stop_message: str | None = None
        self.t0_unix = time.time()
        self._started = False
        # Per-step CUDA events (a CudaTimeline; tests hand in one over a fake torch). Made at start
        # only when CUDA is available: on CPU nothing is hooked and the record says why.
        self.timeline: Any = timeline
        self.timeline_note = ""

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self.t0_unix = time.time()
        self.clock.t0 = time.perf_counter()
        self.hooks.install()
        self.collectives.install()
        self.hooks.after_backward = self.collectives.take_blocked
        try:
            self.syncs.install()
        except Exception as exc:  # an old torch without sync debug mode
            self.notes.append(f"CUDA sync counting unavailable: {exc}")
        try:
            self.sampler.start()
        except Exception as exc:  # pragma: no cover - thread start failing means a broken interpreter
            self.notes.append(f"stack sampler did not start: {exc}")
        self._start_monitor()
        self._start_timeline()
        self._started = True

    def _start_timeline(self) -> None:
        try:
            if self.timeline is None:
                if not torch.cuda.is_available():
                    self.timeline_note = "CUDA is not available: GPU idle time was not measured"
                    return
                from supplyline.collect.cuda_timeline import CudaTimeline

                self.timeline = CudaTimeline(torch)
            self.hooks.timeline = self.timeline
            self.clock.keep_intervals()
        except Exception as exc:  # the diagnosis goes on from the CPU side
            self.timeline = None
            self.timeline_note = f"GPU idle time not measured: {type(exc).__name__}: {exc}"

    def _start_monitor(self) -> None:
        try:
            from supplyline.collect.sampler import Monitor

            os.makedirs(self.out_dir, exist_ok=True)
            self.monitor = Monitor(
                interval=self.options.monitor_interval_s,
                log=os.path.join(self.out_dir, "samples.jsonl"),
                pid=os.getpid(),
            )
            self.monitor.report_log_errors = False  # named with the report files instead (log_failures)
            self.monitor.start()
        except Exception as exc:  # the diagnosis goes on without host metrics
            self.monitor = None
            self.notes.append(f"host monitor unavailable: {exc}")

    def stop(self, outcome: Outcome) -> RunRecord:
        wall = time.perf_counter() - self.clock.t0
        if self.trial.active:  # the script ended (or failed) mid-trial: drain the fix, keep what was measured
            crash = (
                trial_crash.during_trial(self.trial, outcome.exception_type) if outcome.reason == "exception" else None
            )
            self.trial.finish(crash.sentence if crash else "the script ended during the trial")
            if crash is not None:
                trial_crash.void(self.trials, crash)
        self.clock.finish()
        gpu_timeline = self._stop_timeline()
        self.hooks.uninstall()
        self.collectives.uninstall()
        self.syncs.uninstall()
        self.sampler.stop()
        monitor = self._stop_monitor()
        record = self._build_record(outcome, wall, monitor)
        record.gpu_timeline = gpu_timeline
        return record

    def _stop_timeline(self) -> GpuTimeline:
        """The CUDA marks (one sync, now that the job's loop is over), the training thread's phase
        intervals and the sync points, all moved onto the step clock."""
        tl, t0 = self.timeline, self.clock.t0
        if tl is None:
            return GpuTimeline(available=False, note=self.timeline_note)
        try:
            snap = tl.snapshot(t0, wait=True)
            clock = self.clock
            intervals = [
                HostInterval(P.COMPUTE if phase == P.COMPUTE_HOOKED else phase, a - t0, b - t0)
                for phase, a, b in clock.intervals or []
            ]
            align = tl.alignment
            note = snap.note
            if clock.intervals_dropped:
                note = (note + "; " if note else "") + "too many phase intervals: the later steps' GPU idle is 'other'"
            return GpuTimeline(
                available=bool(snap.available and snap.marks),
                note=note,
                device=snap.device,
                alignment_host_s=None if align is None else align.host_s - t0,
                marks=snap.marks,
                intervals=intervals,
                syncs=[SyncPoint(t - t0, line) for t, line in self.syncs.points],
                steps_pending=snap.pending,
                intervals_dropped=clock.intervals_dropped,
            )
        except Exception as exc:  # never fail the report over the GPU side
            return GpuTimeline(available=False, note=f"GPU idle time not measured: {type(exc).__name__}: {exc}")

    @property
    def log_failures(self) -> list[str]:
        """Files the session itself could not write (the host samples log on a full disk)."""
        error = getattr(self.monitor, "log_error", None)
        return [error] if error else []

    def _stop_monitor(self) -> MonitorInfo:
        info = MonitorInfo(interval_s=self.options.monitor_interval_s)
        if self.monitor is None:
            return info
        try:
            self.monitor.stop()
            info.samples = list(self.monitor.samples)
            info.gpu_note = self.monitor.gpu_status or None
            info.t0_unix_s = self.t0_unix
        except Exception as exc:
            self.notes.append(f"host monitor failed: {exc}")
            info.samples = []
        return info

    # -- stopping and what-if -----------------------------------------------------------------
    def _on_step_closed(self, n: int) -> None:
        tl = self.timeline
        if tl is not None:  # first: the stop logic below may raise StopTraining
            st = self.clock.steps
            start = self.clock.t0 + st["start_s"][-1]
            tl.on_step_boundary(start, start + st["duration_s"][-1])
        ctl, schedule = self.ctl, self.schedule
        if schedule.mode is Mode.OBSERVE:
            if not self._limit_reached(n):
                return
            self.observed_steps = n
            self.stop_message = f"stopped after {n} steps"
            if self.whatif.enabled and self.clock.train_loader is not None and ctl.last_batch is not None:
                schedule.enter(Mode.REPLAY)
                self.clock.whatif_label = 1.0
                _say_replay_starts(n, self.options.what_if_steps)
                return
            if self._begin_trials():  # no what-if phases: the trial follows the observed steps
                return
            if not self.whatif.enabled:
                self.whatif.note = "what-if phases off (--no-what-if)"
            elif self.hooks.loop_wait.info is not None:
                self.whatif.note = "the training loop builds its batches itself: no loader to replay or drain"
            else:
                self.whatif.note = "no training DataLoader was seen: nothing to replay or drain"
            schedule.enter(Mode.STOP)
            if self.clock.train_loader is None:
                raise StopTraining()
        elif schedule.mode is Mode.REPLAY and self.observed_steps is not None:
            if n >= self.observed_steps + self.options.what_if_steps:
                schedule.enter(Mode.DRAIN)
        elif schedule.mode is Mode.TRIAL:
            self._trial_step()

    # -- fix trials ---------------------------------------------------------------------------
    def _begin_trials(self) -> bool:
        """Plan from the findings so far and start the first trial segment; False: none runs."""
        info = self.trials
        if not info.enabled:
            if not info.note:
                info.note = "fix trials off (--no-try, or not run by the doctor command)"
            return False
        if self.rank is not None and self.rank.world_size > 1:
            info.note = "not run under torchrun: every rank would have to change its loader or writes the same way"
            return False
        before = self.schedule.mode
        try:
            from supplyline.analyze.report import build_report

            now = self._build_record(Outcome(0, "stopped"), self.clock.elapsed(), self._monitor_snapshot())
            report = build_report(now)
            loader = report.dataloader
            plans = plan_trials(
                [(f.check, f.expected_speedup) for f in report.findings],
                report.dataloader_recommended,
                loader.num_workers if loader else 0,
                now.host.cpu_count,
                loader.stall if loader else "",
                info.steps_requested,
                loader.dataset_shards if loader else None,
            )
            if is_loop(loader) and any(p.fix in LOADER_FIXES for p in plans):
                plans = [p for p in plans if p.fix not in LOADER_FIXES]
                if not plans:
                    info.note = (
                        "not tried: the training loop builds its batches itself; with no loader object "
                        "there is nothing to rebuild in-process"
                    )
                    return False
            if (
                loader is not None
                and loader.loader_module.startswith("torchdata.nodes")
                and any(p.fix in LOADER_FIXES for p in plans)
            ):
                # Its workers live in a node the script built; rebuilding the graph is the script's to do.
                plans = [p for p in plans if p.fix not in LOADER_FIXES]
                if not plans:
                    info.note = (
                        f"not tried: a {loader.name} is not rebuilt in-process (its workers live in its "
                        "ParallelMapper node, which the script builds)"
                    )
                    return False
            if not plans:
                info.note = "no finding with a fix the doctor can try in-process"
                return False
            for plan in plans:
                if plan.fix == "checkpoint":
                    plan.period, plan.last_save = save_period(now.saves)
            loader_object = self.hooks.loader_objects.get(self.clock.train_loader or -1)
            self.trial.step_s = report.steps.step_ms_median / 1e3
            self._before_trial = (len(self.hooks.saves), self.hooks.logging_calls)
            self.clock.whatif_label = TRIAL_LABEL
            self.schedule.enter(Mode.TRIAL)
            if not self.trial.begin(plans, loader_object, first_step=len(now.steps["duration_s"])):
                self.schedule.enter(before)
                return False
        except Exception as exc:  # a trial is a bonus: its failure is a note, the job stops as it would have
            self.trial.finish(f"the trial could not start ({type(exc).__name__}: {exc})")
            info.note = info.note or f"the trial could not start ({type(exc).__name__}: {exc})"
            self.schedule.enter(before)
            return False
        self.schedule.batch_source = self._trial_batch if self.trial.wants_batches else None
        return True

    def _trial_step(self) -> None:
        try:
            done = self.trial.on_step(self.clock.steps["duration_s"][-1], self.schedule.script_iter)
        except Exception as exc:
            self.trial.finish(f"the trial stopped early ({type(exc).__name__}: {exc})")
            done = True
        if done:
            self._end_trials()
        else:
            self.schedule.batch_source = self._trial_batch if self.trial.wants_batches else None

    def _end_trials(self) -> None:
        self.schedule.enter(Mode.STOP)
        if self.clock.train_loader is None:
            raise StopTraining()

    def _trial_batch(self, original: Callable[[Any], Any]) -> Any:
        try:
            return self.trial.next_batch(original)
        except StopIteration:
            self.trial.finish("the trial's loader yielded no batch")
        except Exception as exc:  # a worker that cannot start (spawn and an unpicklable dataset...)
            self.trial.fail(trial_crash.one_line(exc))
        self.schedule.enter(Mode.STOP)
        raise StopTraining()

    def _monitor_snapshot(self) -> MonitorInfo:
        info = MonitorInfo(interval_s=self.options.monitor_interval_s)
        if self.monitor is not None:
            info.samples = list(self.monitor.samples)
        return info

    def _limit_reached(self, n: int) -> bool:
        if self.options.steps is not None and n >= self.options.steps:
            return True
        return self.options.seconds is not None and self.clock.elapsed() >= self.options.seconds

    def _drain(self, it: Any, next_batch: Callable[[Any], Any]) -> None:
        """Loader-only what-if: pull batches with no consumer; skip the ones already prefetched."""
        info = self.hooks.loaders.get(self.clock.train_loader or -1)
        queued = (info.num_workers * (info.prefetch_factor or 0)) if info else 0
        times: list[float] = []
        self.clock.depth = 1  # the drain is not the job's logging or data wait
        try:
            for _ in range(queued + self.options.what_if_steps):
                times.append(time.perf_counter())
                next_batch(it)
        except StopIteration:
            pass
        finally:
            self.clock.depth = 0
        times.append(time.perf_counter())
        measured = times[min(queued, max(len(times) - 2, 0)) :]
        if len(measured) >= 3:
            self.whatif.loader_only_batches = len(measured) - 1
            self.whatif.loader_only_batches_per_s = (len(measured) - 1) / (measured[-1] - measured[0])
        self._begin_trials()  # the real training goes on with the fix, or the hook stops the job

    # -- the record ---------------------------------------------------------------------------
    def _build_record(self, outcome: Outcome, wall: float, monitor: MonitorInfo) -> RunRecord:
        steps = self.clock.snapshot()
        replay = [d for d, w in zip(steps["steps"]["duration_s"], steps["steps"]["whatif"]) if w == 1.0]
        if replay:
            self.whatif.compute_only_steps = len(replay)
            self.whatif.compute_only_step_s = statistics.median(replay)
        self.whatif.ran = bool(replay) and self.whatif.loader_only_batches_per_s is not None
        if self.whatif.enabled and not self.whatif.ran and not self.whatif.note:
            self.whatif.note = (
                "the loader ran out during the what-if phases"
                if self.observed_steps is not None
                else self._ended_early_note()
            )
        lines = [LineSample(**vars(k), samples=c) for k, c in self.sampler.counts.most_common(200)]
        loaders = [self._loader_entry(lid, info) for lid, info in self.hooks.loaders.items()]
        loop = self.hooks.loop_wait.info
        train_id = self.clock.train_loader
        if loop is not None and train_id is None:  # no loader object: the loop that builds batches is the "loader"
            loaders.append(replace(loop, role="train"))
            train_id = loop.loader_id
        saves, logging_calls = list(self.hooks.saves), self.hooks.logging_calls
        if self._before_trial is not None:  # what the trial steps saved and logged is not the job's observed cost
            saves, logging_calls = saves[: self._before_trial[0]], self._before_trial[1]
        return RunRecord(
            **new_version_fields(),
            target=self.target,
            host=host_info(),
            outcome=OutcomeInfo(
                outcome.exit_code,
                outcome.reason,
                self.stop_message if outcome.reason == "stopped" else None,
                outcome.exception_type,
                outcome.exception_message,
                outcome.traceback_text,
                wall,
            ),
            steps=steps["steps"],
            outside_steps_s=steps["outside_steps_s"],
            train_loader_id=train_id,
            loaders=loaders,
            transfers=self.hooks.transfers,
            saves=saves,
            logging_calls=logging_calls,
            line_samples=lines,
            sampler=SamplerInfo(
                interval_s=self.sampler.interval_s,
                samples=self.sampler.samples,
                cpu_s=self.sampler.cpu_s,
                monitor_cpu_s=getattr(self.monitor, "sampler_cpu_s", None),
            ),
            whatif=self.whatif,
            monitor=monitor,
            gpu=self.syncs.info(available=torch.cuda.is_available()),
            notes=self.notes + self.collectives.notes,
            distributed=self._distributed_info(),
            trials=self.trials,
        )

    def _ended_early_note(self) -> str:
        """Why the what-if phases did not run when the script ended on its own; advice only where it helps."""
        limits = [f"--steps {self.options.steps}"] if self.options.steps is not None else []
        limits += [f"--seconds {self.options.seconds:g}"] if self.options.seconds is not None else []
        if limits:  # the user set a limit and the script ended first: a smaller one would leave room
            return f"the script ended before {' / '.join(limits)} was reached, so before the what-if phases"
        return "the script ended before the what-if phases (use --steps N or --seconds T)"

    def _loader_entry(self, loader_id: int, info: LoaderInfo) -> LoaderInfo:
        if loader_id != self.clock.train_loader:
            return replace(info, role="other")
        return replace(info, role="train", dataset_spec=self._dataset_spec(loader_id))

    def _distributed_info(self) -> dict[str, Any] | None:
        c = self.collectives
        if self.rank is None and not c.ddp_models and not c.direct_calls:
            return None
        return {**(self.rank.to_dict() if self.rank else {}), "collectives": c.summary()}

    def _dataset_spec(self, loader_id: int) -> str | None:
        """``MODULE:ATTR`` for the training dataset, so findings can give exact tune/preprocess commands."""
        dataset = self.hooks.datasets.get(loader_id)
        if dataset is None:
            return None
        saved = sys.modules.get("__main__")
        try:
            from supplyline.locate import dataset_spec_for

            if self.hooks.main_module is not None:
                sys.modules["__main__"] = self.hooks.main_module
            return dataset_spec_for(dataset)
        except Exception:  # naming the dataset is a convenience; never fail the report over it
            return None
        finally:
            if saved is not None:
                sys.modules["__main__"] = saved


def host_info() -> HostInfo:
    try:
        shm: int | None = shutil.disk_usage("/dev/shm").free
    except OSError:
        shm = None
    gpus = (
        [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    return HostInfo(
        cpu_count=os.cpu_count() or 1,
        total_memory_bytes=psutil.virtual_memory().total,
        torch_version=torch.__version__,
        torch_threads=torch.get_num_threads(),
        cuda_available=torch.cuda.is_available(),
        gpu_names=gpus,
        shm_free_bytes=shm,
        platform=f"{platform.system()} {platform.machine()} Python {platform.python_version()}",
    )


def _say_replay_starts(observed: int, replays: int) -> None:
    """Once, where the replay starts: its steps are real updates the script may log as training."""
    with contextlib.suppress(Exception):  # a closed or odd stderr must not harm the job
        print(
            f"supplyline doctor: {observed} steps observed; the next {replays} steps are what-if replays of the last "
            "batch (real optimizer updates: the script may log them as training batches)",
            file=sys.stderr,
            flush=True,
        )

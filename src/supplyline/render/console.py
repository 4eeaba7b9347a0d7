"""The doctor's terminal summary (rich, on stderr so the script's own stdout stays clean)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from supplyline import phases as P
from supplyline.analyze.checks import library_label
from supplyline.analyze.next_step import next_step
from supplyline.analyze.report import REPLAY_NOTE, StepStats
from supplyline.analyze.stats import TOO_FEW_ADVICE_DOCTOR, share_text
from supplyline.collect.events import is_loop

if TYPE_CHECKING:
    from supplyline.analyze.breakdown import SourceLine
    from supplyline.analyze.report import LoaderFacts, Report

SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}
QUIET_NOTES = frozenset({REPLAY_NOTE})  # true, and in --details, but they change nothing the user does


def _bar(share: float, width: int = 24) -> str:
    n = round(max(0.0, min(1.0, share)) * width)
    return "█" * n + "·" * (width - n)


def line_share_text(line: SourceLine) -> str:
    """A sampled line's share, or why it is not printed as a number (docs/doctor.md, *How sure*)."""
    return share_text(line.samples, line.total_samples, TOO_FEW_ADVICE_DOCTOR)


def render_summary(
    report: Report,
    out_dir: str | None,
    console: Console | None = None,
    written: Sequence[str] | None = None,
    details: bool = False,
) -> None:
    """The summary on the terminal; ``out_dir`` None when no file could be written, ``written`` the
    files that were (all of them when not given). One screen by default (the verdict, the one fix,
    its gain, the step split, the next command); ``details`` adds every table and note."""
    c = console or Console(stderr=True, highlight=False)
    t, o = report.target, report.outcome
    how = o.stop_message or {
        "completed": "ran to its end",
        "exception": f"crashed ({o.exception_type})",
        "sys_exit": f"exited with {o.exit_code}",
        "interrupted": "interrupted",
        "stopped": "stopped",
    }.get(o.reason, o.reason)
    c.rule(f"[bold]supplyline doctor[/] — {escape(os.path.basename(t.name))} ({escape(how)})")
    if details:
        _details(c, report)
    else:
        _one_screen(c, report, out_dir)
    if out_dir is not None:
        names = ", ".join(
            written if written is not None else ("record.json", "report.json", "report.html", "trace.json")
        )
        c.print(f"\nReport: {escape(out_dir)}/ ({names})")
        if not details:
            # soft_wrap: a command stays one line however narrow the terminal, so it pastes whole
            c.print(
                f"[dim]Everything else (per-line tables, what-if, notes): supplyline report {escape(out_dir)} --details[/]",
                soft_wrap=True,
            )


def _details(c: Console, report: Report) -> None:
    """The full account: what ``--details`` prints (and the HTML shows)."""
    v = report.verdict
    c.print(f"[bold]Verdict:[/] [bold]{v.bound.upper()}[/] — {escape(v.sentence)}")
    _steps(c, report)
    _whatif(c, report)
    _trials(c, report)
    _loader(c, report)
    _findings(c, report)
    if report.data_wait_lines:
        c.print("\n[bold]Where the data wait goes, by line[/]")
        for line in report.data_wait_lines[:5]:
            lib = f" → {escape(library_label(line.library))}" if line.library else ""
            share = f"{line.share_of_step_time * 100:5.1f}%" if line.reliable else "    ? "
            c.print(f"  {share}  {escape(os.path.basename(line.file))}:{line.line}{lib}  {escape(line.code)}")
    if report.top_lines:
        c.print("\n[bold]Time outside the hooks, by line[/]")
        if not any(line.reliable for line in report.top_lines):
            c.print(f"  [dim]{escape(line_share_text(report.top_lines[0]))}: these lines are where samples landed[/]")
        for line in report.top_lines[:5]:
            share = f"{line.share_of_step_time * 100:5.1f}%" if line.reliable else "    ? "
            c.print(
                f"  {share}  {escape(os.path.basename(line.file))}:{line.line}"
                f"  {escape(line.code)}  [dim]({line.phase})[/]"
            )
    _gpu(c, report)
    for note in report.notes:
        c.print(f"[dim]note: {escape(note)}[/]")


def _one_screen(c: Console, report: Report, out_dir: str | None) -> None:
    """The answer on one screen (issue: ≤ 30 lines at 100 columns for the demo)."""
    v = report.verdict
    c.print(f"[bold]Verdict:[/] [bold]{v.bound.upper()}[/] — {escape(v.short)}")
    _step_bar(c, report)
    _gpu_idle_line(c, report)
    step = next_step(report, out_dir)
    if step is None:
        style = "green" if report.steps.observed else "yellow"
        c.print(f"\n[{style}]{escape(report.no_findings_sentence)}[/]")
    else:
        c.print(f"\n[bold]Fix[/] ({step.check}): {escape(step.do)}")
        for line in step.change[:CHANGE_LINES]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            c.print(f"  [{style}]{escape(line)}[/]")
        if step.gain:
            c.print(f"[bold]Gain:[/] {escape(step.gain)}")
        if step.command:
            c.print(f"[bold]Run:[/]  {escape(step.command)}", soft_wrap=True)
        elif step.by_hand:
            c.print(f"[dim]{escape(step.by_hand)}[/]")
    others = report.findings[1:]
    if others:
        also = " · ".join(
            f"{f.check} {f.share_of_step_time * 100:.0f}%" + (f" ({f.gain_text()})" if f.expected_speedup else "")
            for f in others[:4]
        )
        c.print(f"[bold]Also found:[/] {escape(also)}")
    for note in report.notes:
        said = step is not None and (
            (step.by_hand and note.startswith("fix trial: not tried"))
            or ("the trial's loader failed" in note and "the trial's workers failed" in step.gain)
        )  # said above
        if note not in QUIET_NOTES and not said:  # only what changes what the user should do
            c.print(f"[dim]note: {escape(note)}[/]")


CHANGE_LINES = 8  # a framework's snippet fits; a longer one is in --details and the HTML


def _step_bar(c: Console, report: Report, width: int = 60) -> None:
    """The step split as one bar, each phase its own glyph (it reads without colour too)."""
    s = report.steps
    if not s.observed:
        return
    ci = f" (95% CI {s.step_ms_median_ci[0]:.1f}–{s.step_ms_median_ci[1]:.1f})" if s.step_ms_median_ci else ""
    rate = f" · {s.samples_per_s:.0f} samples/s" if s.samples_per_s else ""
    c.print(f"\n[bold]Step[/] {step_words(s, ci)} · {s.steps_per_s:.1f} steps/s{rate} · {s.observed} steps")
    shown = [
        (phase, report.phase_share.get(phase.name, 0.0))
        for phase in P.STEP_PHASES
        if report.phase_share.get(phase.name, 0.0) >= 0.005
    ]
    bar, legend = "", []
    for i, (phase, share) in enumerate(shown):
        glyph = GLYPHS[i % len(GLYPHS)]
        n = max(1, round(share * width))
        bar += f"[{phase.style}]{glyph * n}[/]"
        ms = report.phase_ms_per_step.get(phase.name, 0.0)
        legend.append(f"{glyph} {phase.label.strip()} {share * 100:.0f}% ({ms:.1f} ms)")
    c.print(f"  {bar}")
    c.print("  " + escape(" · ".join(legend)))
    d = report.dataloader
    if d is not None:  # what the wait is on, in the loader's own class and settings
        c.print(f"  [dim]{escape(loader_line(d))}[/]")


GLYPHS = "█▓▒░▞▚"

# Past this mean/median ratio a few long steps carry the time, and the median is no stand-in for the rate.
SKEWED = 1.2


def step_words(s: StepStats, ci: str) -> str:
    """The step time that goes with the steps/s beside it: the mean (the rate is its inverse), and
    the median only beside it, said for what it is, when a few long steps pull the two apart."""
    if s.step_ms_mean > 0 and s.step_ms_mean > SKEWED * s.step_ms_median:
        return f"{s.step_ms_mean:.1f} ms mean, median {s.step_ms_median:.1f} ms{ci}"
    return f"{s.step_ms_median:.1f} ms{ci}"


def _gpu_idle_line(c: Console, report: Report) -> None:
    g = report.gpu_idle
    if g is None or g.idle_share is None:
        return
    causes = sorted(((k, v) for k, v in g.by_phase_share.items() if v >= 0.005), key=lambda kv: -kv[1])
    split = ", ".join(f"{_phase_label(k)} {v * 100:.0f}%" for k, v in causes[:3])
    c.print(
        f"  GPU idle {g.idle_share * 100:.0f}% of the time (CUDA events)"
        + (f" — waiting for {escape(split)}" if split else "")
    )


def _steps(c: Console, report: Report) -> None:
    s = report.steps
    if not s.observed:
        return
    rate = f"{s.samples_per_s:.0f} samples/s" if s.samples_per_s else ""
    ci = f" (95% CI {s.step_ms_median_ci[0]:.1f}–{s.step_ms_median_ci[1]:.1f})" if s.step_ms_median_ci else ""
    c.print(
        f"\n[bold]Step time[/] median {s.step_ms_median:.1f} ms{ci} · mean {s.step_ms_mean:.1f} ms · "
        f"p95 {s.step_ms_p95:.1f} ms · "
        f"{s.steps_per_s:.1f} steps/s {rate} · {s.observed} steps observed"
        + (f" (first {s.warmup_excluded} excluded as warm-up)" if s.warmup_excluded else "")
    )
    for phase in P.STEP_PHASES:
        share = report.phase_share.get(phase.name, 0.0)
        ms = report.phase_ms_per_step.get(phase.name, 0.0)
        if ms == 0 and not phase.shown_when_zero:
            continue  # one process, no collectives: keep the single-machine summary as it was
        c.print(f"  {phase.label:<11}[{phase.style}]{_bar(share)}[/] {share * 100:5.1f}%  {ms:8.2f} ms")
    if report.sampling.note:
        c.print(f"  [dim]{escape(report.sampling.note)}[/]")
    for phase in P.SIDE_PHASES:  # measured on the GPU, beside the split above (it overlaps it)
        if phase.name not in report.phase_share:
            continue
        share, ms = report.phase_share[phase.name], report.phase_ms_per_step.get(phase.name, 0.0)
        c.print(
            f"  {phase.label:<11}[{phase.style}]{_bar(share)}[/] {share * 100:5.1f}%  {ms:8.2f} ms"
            "  [dim](GPU side, overlaps the rows above)[/]"
        )


def _whatif(c: Console, report: Report) -> None:
    w = report.whatif
    if not w.ran:
        return
    c.print(
        f"\n[bold]What-if[/] (labelled phases after the observed steps): observed "
        f"{w.observed_steps_per_s or 0:.1f} steps/s · compute-only {w.compute_only_steps_per_s or 0:.1f} · "
        f"loader-only {w.loader_only_steps_per_s or 0:.1f}" + (f" → {escape(w.claim)}" if w.claim else "")
    )


def _trials(c: Console, report: Report) -> None:
    for t in report.trials:
        if not t.quote:
            c.print(f"\n[bold]Fix trial[/] ({t.fix}): no measurement ({escape(t.note or 'too few steps')})")
            continue
        spread = f" · 95% interval {t.spread[0]:.2f}–{t.spread[1]:.2f}×" if len(t.spread) == 2 else ""
        rates = (
            f" · {t.baseline_steps_per_s:.1f} → {t.trial_steps_per_s:.1f} steps/s"
            if t.baseline_steps_per_s and t.trial_steps_per_s
            else ""
        )
        startup = f" · worker start-up {t.startup_s:.2f} s (not in the rate)" if t.startup_s is not None else ""
        c.print(f"\n[bold]Fix trial[/] ({t.fix}): {escape(t.quote)}{rates}{spread}{startup}")
        if t.note:
            c.print(f"  [dim]{escape(t.note)}[/]")


def loader_line(d: LoaderFacts) -> str:
    """The loader's class and its knobs, in its own terms (a torchdata.nodes pipeline's on its nodes)."""
    if is_loop(d):
        return f"No loader object: the training loop builds its batches itself (batch_size={d.batch_size}, no workers)"
    if d.loader_module.startswith("torchdata.nodes"):
        return (
            f"{d.name}: Batcher batch_size={d.batch_size} · ParallelMapper num_workers={d.num_workers} "
            f"method={d.worker_method} · Prefetcher prefetch_factor={d.prefetch_factor} · pin_memory={d.pin_memory}"
        )
    return (
        f"{d.loader_type} batch_size={d.batch_size} num_workers={d.num_workers} pin_memory={d.pin_memory} "
        f"prefetch_factor={d.prefetch_factor} persistent_workers={d.persistent_workers}"
    )


def _loader(c: Console, report: Report) -> None:
    d = report.dataloader
    if not d:
        return
    first = d.time_to_first_batch_s
    c.print(
        f"\n{escape(loader_line(d))}"
        + (f" · first batch {first * 1e3:.0f} ms" if first is not None else "")
        + (f" · workers {d.worker_cpu_pct_mean:.0f}% CPU each" if d.worker_cpu_pct_mean is not None else "")
    )


def _findings(c: Console, report: Report) -> None:
    if not report.findings:
        style = "green" if report.steps.observed else "yellow"
        c.print(f"\n[{style}]{escape(report.no_findings_sentence)}[/]")
        return
    table = Table(show_header=True, header_style="bold", expand=False, show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("check")
    table.add_column("share", justify="right")
    table.add_column("evidence → fix", overflow="fold")
    table.add_column("gain", justify="right")
    for i, f in enumerate(report.findings, 1):
        gain = f"{f.expected_speedup:.2f}×" if f.expected_speedup else "—"
        if f.spread_is_wide and f.expected_speedup_range:
            gain += f"\n({f.expected_speedup_range[0]:.1f}–{f.expected_speedup_range[1]:.1f})"
        table.add_row(
            str(i),
            f"[{SEVERITY_STYLE[f.severity]}]{f.check}[/]",
            f"{f.share_of_step_time * 100:.0f}%",
            f"{escape(f.evidence)}\n[bold]fix:[/] {escape(f.fix)}",
            gain,
        )
    c.print(table)


def _gpu_idle(c: Console, report: Report) -> None:
    g = report.gpu_idle
    if g is None or g.idle_share is None:
        return
    causes = sorted(((k, v) for k, v in g.by_phase_share.items() if v >= 0.005), key=lambda kv: -kv[1])
    split = ", ".join(f"{_phase_label(k)} {v * 100:.0f}%" for k, v in causes[:4])
    ahead = f" · the CPU ran ahead by {g.cpu_ahead_ms:.1f} ms" if (g.cpu_ahead_ms or 0.0) >= 0.5 else ""
    c.print(
        f"\n[bold]GPU idle[/] (CUDA events, {g.steps_measured} steps): {g.idle_share * 100:.0f}% of the time"
        + (f" — waiting for {escape(split)}" if split else "")
        + ahead
    )
    wait_cpu = report.phase_share.get(P.DATA_WAIT, 0.0)
    wait_gpu = g.by_phase_share.get(P.DATA_WAIT, 0.0)
    if wait_cpu >= 0.05:
        c.print(f"  data wait: CPU side {wait_cpu * 100:.0f}% of step time · GPU idle for it {wait_gpu * 100:.0f}%")
    if g.util_mean_pct is not None:
        saw = " · it drops periodically (saw-tooth)" if g.util_sawtooth else ""
        c.print(f"  NVML utilization during these steps {g.util_mean_pct:.0f}% on average{saw}")
    for line, seconds in sorted(g.sync_lines.items(), key=lambda kv: -kv[1])[:2]:
        c.print(f"  idle after a sync at {escape(os.path.basename(line))}: {seconds * 1e3:.1f} ms in total")


def _phase_label(name: str) -> str:
    return P.label(name) if name in P.BY_NAME else name


def _gpu(c: Console, report: Report) -> None:
    _gpu_idle(c, report)
    util = report.utilization
    gpu = util.gpu_util_pct
    if gpu:
        osc = gpu.oscillation
        c.print(
            f"\n[bold]GPU[/] utilization {gpu.mean:.0f}% on average"
            + (
                f"; it drops periodically (every {osc.period_s or 0:.1f} s, busy {(osc.duty_cycle or 0) * 100:.0f}% of "
                "the time) — the GPU waits for its supply"
                if osc.oscillates
                else ""
            )
        )
    elif util.gpu_note:
        c.print(f"[dim]GPU: {escape(util.gpu_note)}[/]")

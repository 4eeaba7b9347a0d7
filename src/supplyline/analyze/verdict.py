"""One verdict for the run: which side of the supply line bounds the step, in one sentence.

The side is the supply-side phase (from the phase table) with the largest share of step time,
when it takes at least ``BOUND_SHARE``; otherwise the step is the model's own (compute) or, when
most of it is in the user's code outside model, loader and I/O, "unknown" with the line to look at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from supplyline import phases as P
from supplyline.analyze.breakdown import Breakdown
from supplyline.analyze.checks import AHEAD_SHOWN_S, Finding
from supplyline.analyze.gpu_idle import SYNC, GpuIdleResult, gpu_side

BOUND_SHARE = 0.20  # a supply-side phase at 20% of step time or more is what bounds the step
OTHER_SHARE = 0.30
COMPUTE_BOUND = P.COMPUTE_BOUND
MENTION_SHARE = 0.05  # a phase apart (in-loop evaluation) named in the verdict from this share
# Two runs of one job under a changing load put its wait at 19.5% and 20.1%: the within-run interval
# (steps taken as independent) is narrower than that, so the edge is at least this wide either side.
EDGE = 0.02


@dataclass
class Verdict:
    bound: P.Bound
    sentence: str
    # The sentence without the gain of fixing it: the one-screen summary prints the gain on its own
    # line, beside the prediction ("" when the sentence carries no gain).
    headline: str = ""

    @property
    def short(self) -> str:
        return self.headline or self.sentence


def verdict(
    b: Breakdown,
    findings: list[Finding],
    gpu: GpuIdleResult | None = None,
    measured: str = "",
    loader_seen: bool = True,
    waits_on: str = "",
    wait_noun: str = "the DataLoader wait",
    trial_decision: str | None = None,
    gil_bound: bool = False,
) -> Verdict:
    """The CPU-side verdict, or on CUDA (``gpu`` measured) the one judged from GPU idle time.

    ``measured``: the top finding's trial in words, quoted instead of the bare prediction.
    ``loader_seen``: the job had a DataLoader, so its wait is a measured figure worth quoting.
    ``waits_on``: what the data wait is, naming the loader ("waiting for the StatefulDataLoader");
    ``wait_noun``: the same as a noun, for the compute-bound sentence ("the DataLoader wait").
    ``trial_decision``: the top finding's trial answer (faster / slower / no difference / failed).
    ``gil_bound``: the loader's thread workers and the training thread share about one core (the GIL).

    A share at the edge of ``BOUND_SHARE`` (its 95% interval, or ``EDGE`` either side, holds the
    threshold) does not decide by which side its point fell: a trial of the fix decides (faster:
    bound), and without one the step is called the model's, the sentence saying it is at the edge.
    Two runs of one job then get one verdict, not COMPUTE at 19.5% and INPUT at 20.1%. Without a
    trial, a GIL-bound loader decides a data wait at the edge: its threads hold the GIL the training
    thread needs, so part of the step's own time is theirs and the wait's share understates the input
    side (a torchdata.nodes mapper with one thread worker: wait 26–48% over 8 runs, compute doubled)."""
    if b.steps and gpu is not None and gpu.idle_share is not None and gpu.wall_s > 0:
        return gpu_verdict(b, findings, gpu, measured)
    if b.steps == 0:
        return Verdict(
            "unknown",
            "No training steps were seen: no optimizer step, backward or DataLoader batch ran under the doctor.",
        )
    s = b.phase_share
    top = max(P.SUPPLY_SIDE, key=lambda phase: s.get(phase.name, 0.0))
    share = s.get(top.name, 0.0)
    ci = b.share_ci.get(top.name)
    low, high = (min(ci.low, share - EDGE), max(ci.high, share + EDGE)) if ci else (share - EDGE, share + EDGE)
    at_edge = top.bound is not None and low < BOUND_SHARE <= high
    gil_decides = at_edge and trial_decision is None and gil_bound and top.name == P.DATA_WAIT
    bound = (trial_decision == "faster" or gil_decides) if at_edge else share >= BOUND_SHARE
    if bound and top.bound is not None:
        words = waits_on if top.name == P.DATA_WAIT and waits_on else top.words
        head = f"{top.bound.capitalize()}-bound: {share * 100:.0f}% of each training step is spent {words}"
        if gil_bound and top.name == P.DATA_WAIT:  # gil_decides is one case of it
            head += (
                "; its thread workers hold the GIL the training thread needs, so part of the compute time is theirs too"
            )
        return Verdict(top.bound, f"{head}{_gain(findings, measured)}.", f"{head}.")
    if s[P.OTHER] >= OTHER_SHARE and s[P.OTHER] > s[P.COMPUTE] and b.split_reliable:
        where = b.top_lines[0] if b.top_lines else None
        at = f", most at {os.path.basename(where.file)}:{where.line} `{where.code}`" if where else ""
        return Verdict(
            "unknown",
            f"{s[P.OTHER] * 100:.0f}% of step time is in your own code outside the model, the loader and I/O{at}.",
        )
    # Evaluation inside the loop is time the step spends, but not the model's training work: named apart.
    apart = [p for p in P.APART if s.get(p.name, 0.0) >= MENTION_SHARE]
    big = max(apart, key=lambda p: s[p.name], default=None)
    if big is not None and s[big.name] >= BOUND_SHARE and s[big.name] > s[P.COMPUTE]:
        return Verdict(
            COMPUTE_BOUND,
            f"{s[big.name] * 100:.0f}% of each training step is spent {big.words}, not in training updates; "
            f"the model's own training work is {s[P.COMPUTE] * 100:.0f}% — evaluate less often to train faster.",
        )
    also = "".join(f", {s[p.name] * 100:.0f}% is {p.words}" for p in apart)
    wait = f" and {wait_noun} is {s[P.DATA_WAIT] * 100:.0f}%" if loader_seen else ""
    if at_edge and top.bound is not None:
        tried = {
            "slower": "its fix measured slower",
            "no difference": "its fix measured no clear gain",
            "failed": "its fix failed in the trial",
        }.get(trial_decision or "", "no trial measured its fix")
        noun = wait_noun if top.name == P.DATA_WAIT else f"the {top.label.strip()}"
        wait = (
            f" and {noun} is {share * 100:.0f}% ({max(low, 0) * 100:.0f}–{high * 100:.0f}%), at the edge of "
            f"{top.bound}-bound: {tried}"
        )
    return Verdict(
        COMPUTE_BOUND,
        f"Compute-bound: the supply line keeps up — {s[P.COMPUTE] * 100:.0f}% of step time is the model's own work"
        f"{also}{wait}.",
    )


def _gain(findings: list[Finding], measured: str = "") -> str:
    first = findings[0] if findings else None
    if first and measured:
        return f"; fixing it ({first.check}): {measured}"
    if first and first.expected_speedup:
        return f"; fixing it should give about {first.gain_text()} ({first.check})"
    return ""


def gpu_verdict(b: Breakdown, findings: list[Finding], g: GpuIdleResult, measured: str = "") -> Verdict:
    """The verdict as the GPU saw it: the host side the GPU sat idle for, with the CPU-side share
    beside it. A CPU that waited long for data while the GPU stayed busy (it ran ahead) is not input-bound."""
    s = b.phase_share
    idle = g.idle_share or 0.0
    ahead = g.cpu_ahead_s_median
    ahead_txt = f"; the CPU ran ahead by {ahead * 1e3:.1f} ms" if ahead is not None and ahead >= AHEAD_SHOWN_S else ""
    side = gpu_side(g, BOUND_SHARE)
    blamed = [p for p in P.SUPPLY_SIDE if p.bound == side]
    if blamed:
        gpu_share = sum(g.by_phase.get(p.name, 0.0) for p in blamed) / g.wall_s
        top = max(blamed, key=lambda p: g.by_phase.get(p.name, 0.0))
        cpu_share = sum(s.get(p.name, 0.0) for p in blamed)
        head = (
            f"{side.capitalize()}-bound: the GPU sat idle {gpu_share * 100:.0f}% of the time while the training "
            f"thread was {top.words} (CPU-side: {cpu_share * 100:.0f}% of step time)"
        )
        return Verdict(top.bound or "unknown", f"{head}{_gain(findings, measured)}.", f"{head}.")
    own = (g.by_phase.get(P.OTHER, 0.0) + g.by_phase.get(SYNC, 0.0)) / g.wall_s
    if own >= OTHER_SHARE:
        line = max(g.sync_lines.items(), key=lambda kv: kv[1])[0] if g.sync_lines else None
        at = f", most after a sync at {os.path.basename(line)}" if line else ""
        return Verdict(
            "unknown",
            f"The GPU sat idle {own * 100:.0f}% of the time while the host ran your own code outside the model, "
            f"the loader and I/O{at}.",
        )
    cpu_top = max(P.SUPPLY_SIDE, key=lambda phase: s.get(phase.name, 0.0))
    cpu_share = s.get(cpu_top.name, 0.0)
    if cpu_share >= BOUND_SHARE and cpu_top.bound is not None:
        return Verdict(
            COMPUTE_BOUND,
            f"Compute-bound on the GPU: it was idle only {idle * 100:.0f}% of the time. The training thread spent "
            f"{cpu_share * 100:.0f}% of each step {cpu_top.words}, but the GPU stayed busy meanwhile{ahead_txt}: "
            f"the {cpu_top.bound} side is not what slows the step.",
        )
    return Verdict(
        COMPUTE_BOUND,
        f"Compute-bound: the GPU was busy {(1 - idle) * 100:.0f}% of the time (idle {idle * 100:.0f}%) and the "
        f"supply line keeps up{ahead_txt}.",
    )

"""The phases of a training step, declared once.

Every consumer reads this table: the step clock (which phases hooks measure), the breakdown (the
order of the columns), the verdict (which side a phase blames, in which words), the findings, the
terminal, the live panel, the merged torchrun table, the trace and the HTML page (through the JSON
it embeds). Adding a phase is one entry here plus its measurement (docs/contributing.md).

A step is split into these phases; their times add up to the step's wall time. How each is measured
is in docs/how-it-works.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

PhaseName = Literal[
    "data_wait", "transfer", "compute", "collective", "logging", "checkpoint", "eval", "other", "gpu_idle"
]
Bound = Literal["input", "transfer", "logging", "checkpoint", "collective", "compute", "unknown"]

# The verdict when no supply-side phase bounds the step: the model's own work.
COMPUTE_BOUND: Bound = "compute"

DATA_WAIT: PhaseName = "data_wait"
TRANSFER: PhaseName = "transfer"
COMPUTE: PhaseName = "compute"
COLLECTIVE: PhaseName = "collective"
LOGGING: PhaseName = "logging"
CHECKPOINT: PhaseName = "checkpoint"
EVAL: PhaseName = "eval"
OTHER: PhaseName = "other"
GPU_IDLE: PhaseName = "gpu_idle"

# The part of compute that hooks time directly (backward, optimizer step); the rest of compute is
# split off the unhooked time by the stack sampler.
COMPUTE_HOOKED = "compute_hooked"


@dataclass(frozen=True)
class Phase:
    name: PhaseName
    label: str  # short, for table headers and legends
    long_label: str  # for the page's legend, where there is room to explain
    style: str  # rich style in the terminal
    colour: str  # CSS colour on the HTML page
    hooked: bool  # timed directly by a hook on the step clock (else derived from the rest of the step)
    bound: Bound | None  # the side a verdict blames when this phase dominates (None: never blamed alone)
    words: str  # "…% of each training step is spent <words>"
    # A straggler rank that ``<doing>`` ({x} is ms per step), in the merged torchrun report.
    doing: str = ""
    shown_when_zero: bool = True  # one process has no collectives: hide the row rather than print 0%
    # Part of the split of a step's wall time on the training thread (the shares add up to 1). A
    # GPU-side measure (gpu_idle) overlaps the CPU phases: it is shown beside them, never stacked.
    partition: bool = True

    @property
    def cause(self) -> str:
        """The cause a merged report names when this phase makes a rank the straggler."""
        return self.bound or self.name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PHASES: tuple[Phase, ...] = (
    Phase(
        DATA_WAIT,
        "data wait",
        "data wait",
        "red",
        "#d62728",
        True,
        "input",
        "waiting for the DataLoader",
        "waits {x} ms per step on its DataLoader",
    ),
    Phase(
        TRANSFER,
        "transfer",
        "transfer",
        "magenta",
        "#9467bd",
        True,
        "transfer",
        "copying batches to the device",
        "copies batches to its device for {x} ms per step",
    ),
    Phase(
        COMPUTE,
        "compute",
        "compute",
        "green",
        "#2ca02c",
        False,
        "compute",
        "the model's own work",
        "computes for {x} ms per step",
    ),
    Phase(
        COLLECTIVE,
        "collective",
        "collective (waiting for other ranks)",
        "blue",
        "#1f3fbf",
        True,
        "collective",
        "waiting for the other ranks in all-reduce (the merged report names the rank they wait for)",
        shown_when_zero=False,
    ),
    Phase(
        LOGGING,
        "logging",
        "logging",
        "yellow",
        "#e6b800",
        True,
        "logging",
        "logging and writing synchronously",
        "logs and writes synchronously for {x} ms per step",
    ),
    Phase(
        CHECKPOINT,
        "checkpoint",
        "checkpoint",
        "cyan",
        "#17becf",
        True,
        "checkpoint",
        "saving checkpoints synchronously",
        "saves checkpoints for {x} ms per step",
    ),
    Phase(
        EVAL,
        "eval",
        "evaluation inside the training loop",
        "bright_blue",
        "#6baed6",
        True,
        # Neither the supply line's fault nor the model's training work: the verdict names it apart
        # instead of blaming a side or calling it compute.
        None,
        "evaluating inside the training loop",
        "evaluates inside its training loop for {x} ms per step",
        shown_when_zero=False,
    ),
    Phase(
        OTHER,
        "other",
        "other",
        "white",
        "#8c8c8c",
        False,
        None,
        "in your own code",
        "spends {x} ms per step in its own code outside the model, the loader and I/O",
    ),
    # Measured by two CUDA events per step and attributed to the host phase the GPU waited for
    # (analyze/gpu_idle.py); only on CUDA, only when the job initialised CUDA itself.
    Phase(
        GPU_IDLE,
        "gpu idle",
        "GPU idle (waiting for the host; overlaps the CPU phases)",
        "bright_red",
        "#7f0000",
        False,
        None,
        "with the GPU idle, waiting for the host",
        shown_when_zero=False,
        partition=False,
    ),
)

BY_NAME: dict[str, Phase] = {p.name: p for p in PHASES}
# The phases that split a step's wall time (breakdown columns, stacked bars, merged tables).
STEP_PHASES: tuple[Phase, ...] = tuple(p for p in PHASES if p.partition)
PHASE_ORDER: tuple[PhaseName, ...] = tuple(p.name for p in STEP_PHASES)
# Measures beside the split (the GPU's own idle time): drawn next to it, never added into it.
SIDE_PHASES: tuple[Phase, ...] = tuple(p for p in PHASES if not p.partition)
# What the step clock times, in the order of its columns (``<name>_s``); collective and eval last
# because records written before them have no such column (it reads as zeros).
CLOCK_PHASES: tuple[str, ...] = (DATA_WAIT, TRANSFER, LOGGING, CHECKPOINT, COMPUTE_HOOKED, COLLECTIVE, EVAL)
# Phases a verdict can blame on the supply side (everything hooked but compute, and never a phase
# without a side: in-loop evaluation is named apart).
SUPPLY_SIDE: tuple[Phase, ...] = tuple(p for p in STEP_PHASES if p.hooked and p.bound is not None)
# Hooked phases that are neither the supply line nor the model's training work.
APART: tuple[Phase, ...] = tuple(p for p in STEP_PHASES if p.hooked and p.bound is None)

# Extra legend entries on the page for steps that are not observed ones.
STEP_KINDS: dict[str, dict[str, str]] = {
    "warmup": {"label": "warm-up step (not analysed)", "colour": "#c8c8c8"},
    "whatif": {"label": "what-if replay step", "colour": "#dddddd"},
}


def label(name: str) -> str:
    return BY_NAME[name].label


def style(name: str) -> str:
    return BY_NAME[name].style


def page_table() -> dict[str, Any]:
    """The table as the HTML page reads it from its embedded JSON."""
    return {
        "order": list(PHASE_ORDER),
        "side": [p.name for p in SIDE_PHASES],
        "label": {p.name: p.long_label for p in PHASES} | {k: v["label"] for k, v in STEP_KINDS.items()},
        "colour": {p.name: p.colour for p in PHASES} | {k: v["colour"] for k, v in STEP_KINDS.items()},
    }

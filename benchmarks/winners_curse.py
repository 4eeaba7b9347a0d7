"""The winner's curse of a loader trial, measured: how far the best of several noisy candidates
overstates its gain, and what measuring the chosen one again on fresh stretches leaves of that bias.

The doctor's TrialRunner is driven with simulated step times (no job: the bias is a property of the
arithmetic, and a simulation knows the truth). Every candidate makes the step exactly TRUTH times
faster; the machine drifts (a random walk of ±10% a stretch) and steps vary by 20%. For each
simulated trial two figures are read from the same record:
- "best stretch": the chosen candidate's choice-round rate over the unchanged choice-round rate
  (what a trial that reports its winning stretch would say: the doctor before this change);
- "fresh stretches": the trial's own figure, from the A B A B measuring round of the chosen one.
Reported: the median and the 10th-90th percentiles of each over TRIALS simulated trials, as ratios
to the truth, and how often the 95% interval holds the truth.

Run: PYTHONPATH=src python benchmarks/winners_curse.py [TRIALS] [CANDIDATES]
"""

from __future__ import annotations

import random
import statistics
import sys
from typing import Any

import torch

from supplyline.collect.events import TrialsInfo
from supplyline.doctor.trials import PlannedTrial, TrialRunner

TRUTH = 1.3


def simulate(seed: int, candidates: int) -> tuple[float, float, bool]:
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(8, 1)), batch_size=1)
    info = TrialsInfo(enabled=True, steps_requested=40)
    runner = TrialRunner(info, lambda line: None)
    plans = [{"num_workers": n, "prefetch_factor": 2} for n in range(1, candidates + 1)]
    assert runner.begin([PlannedTrial("dataloader", None, plans)], loader)
    rng = random.Random(seed)
    machine: dict[int, float] = {}

    def duration(seg: Any) -> float:
        key = id(seg)
        if key not in machine:
            machine[key] = (list(machine.values())[-1] if machine else 1.0) * rng.uniform(0.9, 1.1)
        mean = 0.01 * machine[key] / (TRUTH if seg.label == "B" else 1.0)
        return max(1e-5, rng.gauss(mean, 0.2 * mean))

    done = False
    while not done:
        done = runner.on_step(duration(runner.segment))
    (trial,) = info.trials
    select = [s for s in trial.segments if s.round == "select"]
    unchanged = next(s.steps_per_s for s in select if s.label == "A")
    best = max(s.steps_per_s or 0.0 for s in select if s.label == "B")
    fresh = trial.measured_speedup or float("nan")
    held = bool(trial.spread) and trial.spread[0] <= TRUTH <= trial.spread[1]
    return best / (unchanged or float("nan")), fresh, held


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=10)
    return f"{statistics.median(values) / TRUTH:.3f} ({q[0] / TRUTH:.3f}-{q[-1] / TRUTH:.3f})"


def main(trials: int = 300, candidates: int = 3) -> None:
    runs = [simulate(seed, candidates) for seed in range(trials)]
    print(f"{trials} simulated loader trials, {candidates} candidates, truth {TRUTH}x for every one")
    print("figure / truth, median (10th-90th percentile)")
    print(f"  best stretch of the choice round: {spread([r[0] for r in runs])}")
    print(f"  fresh A B A B of the chosen one:  {spread([r[1] for r in runs])}")
    print(f"  95% interval holds the truth in {sum(r[2] for r in runs) / trials:.0%} of the trials")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))

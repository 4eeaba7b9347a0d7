"""How close the doctor's prediction and its fix trial come to the truth, on planted jobs.

    PYTHONPATH=src python benchmarks/prediction_accuracy.py [--repeats 5] [--steps 60] [--only NAME]

For each planted job (written out below as a real script), ``--repeats`` rounds of:

- the doctor on the job unchanged (``--steps 30 --what-if-steps 10 --try-steps 30``): its top
  finding's predicted speed-up, and its trial's measured one with its interval, its answer
  (faster / slower / no difference) and the settings it kept;
- then the truth, plain ``python job.py``, alternating: the original, a copy with the recommended
  fix applied by editing the script (the DataLoader settings the model recommended (`dataloader_recommended[...].model` beside a trial), or the background writer
  / saver installed at the top), and, when the trial kept other settings, a copy with those. Each
  run reports its own steps/s from its second step on (start-up left out, as the trial does).

The table gives, per job over the rounds: the truth of the recommended fix (median and range of
the per-round ratios) and the prediction judged against it; the truth of the kept settings and
the trial judged against it round by round (median error and worst round); and how many rounds'
answers agree with the truth's direction (see ``direction_right``). The conv-net jobs are the
dcgan case: the model's intra-op threads on every core, so a worker takes a core from them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from supplyline.analyze.trial_result import trial_decision

HEAD = """
import os, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset
torch.set_num_threads(1)
torch.manual_seed(0)
STEPS = int(sys.argv[1])
LOADER = eval(sys.argv[2]) if len(sys.argv) > 2 else {}  # the edit: DataLoader settings
FIX = sys.argv[3] if len(sys.argv) > 3 else ""
if FIX == "writes":
    from supplyline.apply.writes import BackgroundWrites
    BackgroundWrites().install()
if FIX == "saves":
    from supplyline.apply.checkpoint import BackgroundSaves
    BackgroundSaves().install()
OUT = os.environ.get("BENCH_OUT", ".")

class Prep(Dataset):
    # per-sample CPU work: 1 ms of Python a sample
    shape = (64,)
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:
            for k in range(64):
                acc = acc * 0.5 + k
        return torch.randn(*self.shape), i % 10

class Slow(Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        time.sleep(0.015)
        return torch.randn(64), i % 10

def loader(dataset, batch_size, **given):
    settings = {**given, **LOADER}
    if not settings.get("num_workers"):
        settings.pop("prefetch_factor", None)
        settings.pop("persistent_workers", None)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, **settings)

class PrepImage(Prep):
    # the same work on a 3x32x32 image: the input side of a small conv net
    shape = (3, 32, 32)

def conv_net():
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )

def train(batches, after_step=lambda step, loss: None, model=None):
    model = model or nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    first = None
    for step, (x, y) in enumerate(batches):
        if step == 1:
            first = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        after_step(step, loss)
        if step + 1 == STEPS:
            break
    if first is not None and step > 1:
        print(f"RATE {(step - 1) / (time.perf_counter() - first):.4f}", flush=True)
"""

JOBS: dict[str, tuple[str, str]] = {
    # name: (body, fix kind: loader | writes | saves | none)
    "prep, num_workers=0": ("train(loader(Prep(), 16, num_workers=0))", "loader"),
    "prep, num_workers=1": ("train(loader(Prep(), 16, num_workers=1))", "loader"),
    # The dcgan case: the model's own intra-op threads on every core, beside per-sample CPU work;
    # a worker takes a core from the model's threads.
    "conv net on all cores, num_workers=0": (
        "torch.set_num_threads(os.cpu_count())\ntrain(loader(PrepImage(), 16, num_workers=0), model=conv_net())",
        "loader",
    ),
    "conv net on all cores, num_workers=1": (
        "torch.set_num_threads(os.cpu_count())\ntrain(loader(PrepImage(), 16, num_workers=1), model=conv_net())",
        "loader",
    ),
    "storage latency, 2 workers": ("train(loader(Slow(), 8, num_workers=2))", "loader"),
    "log + fsync 20x a step": (
        """
log = open(os.path.join(OUT, "train.log"), "a")
def write(step, loss):
    for _ in range(20):
        log.write(f"step {step} loss {loss.item():.4f}\\n")
        log.flush()
        os.fsync(log.fileno())
data = TensorDataset(torch.randn(20000, 64), torch.randint(0, 10, (20000,)))
train(DataLoader(data, batch_size=32), write)
""",
        "writes",
    ),
    "32 MB checkpoint every 5 steps": (
        """
table = torch.randn(8 * 2**20)
def save(step, loss):
    if step % 5 == 0:
        torch.save({"table": table, "step": step}, os.path.join(OUT, "ckpt.pt"))
data = TensorDataset(torch.randn(8192, 64), torch.randint(0, 10, (8192,)))
train(DataLoader(data, batch_size=16), save)
""",
        "saves",
    ),
    "healthy (compute-bound)": (
        """
data = TensorDataset(torch.randn(8192, 64), torch.randint(0, 10, (8192,)))
big = nn.Sequential(nn.Linear(64, 2048), nn.ReLU(), nn.Linear(2048, 2048))
def work(step, loss):
    big(torch.randn(256, 64)).sum().backward()
train(DataLoader(data, batch_size=64, shuffle=True), work)
""",
        "none",
    ),
}


def run_rate(script: str, args: list[str], env: dict[str, str]) -> float:
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RATE "):
            return float(line.split()[1])
    raise RuntimeError(f"{script} {args}: no rate\n{proc.stderr[-2000:]}")


def doctor(script: str, out: str, env: dict[str, str]) -> dict:
    cmd = [sys.executable, "-m", "supplyline", "doctor", "--quiet", "--out", out, "--steps", "30"]
    cmd += ["--what-if-steps", "10", "--try-steps", "30", script, "100000"]
    subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
        return json.load(fh)


EQUIVALENT = 1.05  # the trials' own margin: a truth within ±5% of 1.0 is "no difference"


def truth_direction(ratios: list[float]) -> str:
    """The truth's answer from alternating pairs: faster (median past +5%, every pair above 1),
    slower (past -5%, every pair below 1), or no difference."""
    med = statistics.median(ratios)
    if med >= EQUIVALENT and min(ratios) > 1.0:
        return "faster"
    if med <= 1 / EQUIVALENT and max(ratios) < 1.0:
        return "slower"
    return "no difference"


def direction_right(decision: str | None, spread: list[float], truth: list[float]) -> bool:
    """The trial's answer agrees with the truth: the same direction, or a truth too close to 1.0 to
    have one (within ±5%) that the trial's interval holds."""
    if decision is None:
        return False
    if decision == truth_direction(truth):
        return True
    med = statistics.median(truth)
    near = 1 / EQUIVALENT < med < EQUIVALENT
    return near and len(spread) == 2 and spread[0] <= med <= spread[1]


def loader_settings(rep: dict) -> tuple[dict, dict]:
    rec = rep.get("dataloader_recommended") or {}
    # the settings the prediction is for: the model's own, beside a trial's answer
    recommended = {
        k: e.get("model", e["recommended"])
        for k, e in rec.items()
        if k != "batch_size" and e.get("model", e["recommended"]) != e["seen"]
    }
    trial = rep["trials"][0] if rep["trials"] else None
    tried = dict(trial["settings"]) if trial and trial["fix"] in ("dataloader", "storage") else {}
    return recommended, tried


def measure(name: str, body: str, kind: str, repeats: int, steps: int, work: str) -> dict:
    """``repeats`` rounds of: the doctor on the unchanged job (its prediction and its trial), then
    one alternating truth pair for each fix it named (before, recommended, tried). Each round's
    trial is judged against the truth of the settings that round's trial kept."""
    script = os.path.join(work, name.split(",")[0].split()[0] + f"_{abs(hash(name)) % 1000}.py")
    with open(script, "w", encoding="utf-8") as fh:
        fh.write(HEAD + textwrap.dedent(body))
    env = {**os.environ, "BENCH_OUT": work}
    fix = {"loader": "", "writes": "writes", "saves": "saves"}.get(kind, "")
    rounds = []
    for r in range(repeats):
        rep = doctor(script, os.path.join(work, f"report-{r}-" + os.path.basename(script)), env)
        top = rep["findings"][0] if rep["findings"] else None
        trial = rep["trials"][0] if rep["trials"] else None
        recommended, tried = loader_settings(rep) if kind == "loader" else ({}, {})
        # The prediction is for the recommended settings, the trial's for the ones it kept; a
        # recommendation of "no change" is the unchanged script again (its truth: run-to-run noise).
        variants: dict[str, dict] = (
            {"recommended": recommended, "tried": tried} if kind == "loader" else {"recommended": {}}
        )
        if kind == "loader" and (not tried or tried == recommended):
            variants.pop("tried")
        time.sleep(1.0)  # let the doctor's processes end before timing
        # Mirrored order (unchanged, fixes..., fixes reversed, unchanged): a drift of the machine
        # across the round touches every variant alike.
        order = [("unchanged", {}), *variants.items()]
        rates: dict[str, list[float]] = {v: [] for v, _ in order}
        for variant, settings in order + order[::-1]:
            rates[variant].append(
                run_rate(script, [str(steps), repr(settings), fix if variant != "unchanged" else ""], env)
            )
        before = statistics.mean(rates["unchanged"])
        truth = {v: statistics.mean(rates[v]) / before for v in variants}
        spread = trial["spread"] if trial else []
        rounds.append(
            {
                "finding": top["check"] if top else "-",
                "predicted": top["expected_speedup"] if top and top["expected_speedup"] else 1.0,
                "truth": truth["recommended"],
                "trial": trial["measured_speedup"] if trial else None,
                "trial_spread": spread,
                "trial_decision": trial_decision(trial["measured_speedup"], spread) if trial else None,
                "trial_truth": truth.get("tried", truth["recommended"]),
                "recommended": recommended or ({"fix": kind} if kind not in ("loader", "none") else {}),
                "tried": tried,
            }
        )
    return {"job": name, "rounds": rounds}


def err(value: float | None, truth: float) -> float | None:
    return None if value is None else value / truth - 1.0


def settings_text(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items()) or "no change"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, (body, kind) in JOBS.items():
            if args.only and args.only not in name:
                continue
            rows.append(measure(name, body, kind, args.repeats, args.steps, work))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.repeats} rounds a job")
    print(
        "| job | finding | truth, recommended: median (range) | predicted: median (err) | truth, kept (range) "
        "| trial: median (err median; worst) | direction right | settings |"
    )
    print("|---|---|---|---|---|---|---|---|")
    trial_med, trial_worst, pred_med, wrong = [], [], [], []
    for row in rows:
        rs = row["rounds"]
        truth = [r["truth"] for r in rs]
        pred = statistics.median(r["predicted"] for r in rs)
        pe = err(pred, statistics.median(truth))
        pred_med.append(abs(pe))
        kept_truth = [r["trial_truth"] for r in rs]
        trial_text, right_text = "no trial", "-"
        trials = [r for r in rs if r["trial"] is not None]
        if trials:
            errs = [err(r["trial"], r["trial_truth"]) for r in trials]
            med_err = statistics.median(errs)
            worst = max(errs, key=abs)
            trial_med.append(abs(med_err))
            trial_worst.append(abs(worst))
            # direction: each round's answer against the truth pairs of every round that kept the same
            # settings (one pair alone is noisy)
            right = sum(
                direction_right(
                    r["trial_decision"], r["trial_spread"], [q["trial_truth"] for q in rs if q["tried"] == r["tried"]]
                )
                for r in trials
            )
            if right < len(trials):
                wrong.append(row["job"])
            decisions = sorted({r["trial_decision"] for r in trials})
            trial_text = f"{statistics.median(r['trial'] for r in trials):.2f}× ({med_err:+.0%}; {worst:+.0%})"
            right_text = f"{right}/{len(trials)} ({', '.join(decisions)}; truth {truth_direction(kept_truth)})"
        kept = sorted({settings_text(r["tried"]) for r in rs if r["tried"]})
        settings = "; ".join(sorted({settings_text(r["recommended"]) for r in rs}))
        if kept:
            settings += "; kept " + " / ".join(kept)
        print(
            f"| {row['job']} | {'/'.join(sorted({r['finding'] for r in rs}))} | {statistics.median(truth):.2f}× "
            f"({min(truth):.2f}–{max(truth):.2f}) | {pred:.2f}× ({pe:+.0%}) | {statistics.median(kept_truth):.2f}× "
            f"({min(kept_truth):.2f}–{max(kept_truth):.2f}) | {trial_text} | {right_text} | {settings} |"
        )
    if trial_med:
        print(
            f"trial error: median of jobs' medians {statistics.median(trial_med):.0%}, worst job median "
            f"{max(trial_med):.0%}, worst single round {max(trial_worst):.0%} (targets ±15% median, ±25% worst)"
        )
    print(f"prediction error: median {statistics.median(pred_med):.0%}, worst {max(pred_med):.0%} (target ±15% median)")
    print("direction right on every job" if not wrong else f"direction wrong on: {', '.join(wrong)}")


if __name__ == "__main__":
    main()

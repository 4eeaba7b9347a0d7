"""How close the doctor's prediction and its fix trial come to the truth, on planted jobs.

    PYTHONPATH=src python benchmarks/prediction_accuracy.py [--repeats 3] [--steps 60] [--only NAME]

For each planted job (written out below as a real script):

- the doctor runs it unchanged (``--steps 30 --what-if-steps 10 --try-steps 30``) and gives its top
  finding's predicted speed-up and its trial's measured one, with the settings the trial kept;
- the truth is plain ``python job.py``: the original against a copy with the fix applied by
  editing the script (the DataLoader settings the doctor recommended and, when its trial kept
  other ones, those too; or the background writer / saver installed at the top), alternating
  runs, ``--repeats`` each. Each run reports its own steps/s from its second step on (start-up
  left out, as the trial does).

The table gives each truth (median and range of the per-pair ratios), the prediction (judged
against the truth of the recommended settings) and the trial (against the truth of the settings
it kept), each with its error.
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
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        t = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - t < 0.001:
            for k in range(64):
                acc = acc * 0.5 + k
        return torch.randn(64), i % 10

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

def train(batches, after_step=lambda step, loss: None):
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
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


def measure(name: str, body: str, kind: str, repeats: int, steps: int, work: str) -> dict:
    script = os.path.join(work, name.split(",")[0].split()[0] + f"_{abs(hash(name)) % 1000}.py")
    with open(script, "w", encoding="utf-8") as fh:
        fh.write(HEAD + textwrap.dedent(body))
    env = {**os.environ, "BENCH_OUT": work}
    rep = doctor(script, os.path.join(work, "report-" + os.path.basename(script)), env)
    top = rep["findings"][0] if rep["findings"] else None
    trial = rep["trials"][0] if rep["trials"] else None
    recommended: dict = {}
    tried: dict = {}
    if kind == "loader":
        rec = rep.get("dataloader_recommended") or {}
        recommended = {
            k: e["recommended"] for k, e in rec.items() if k != "batch_size" and e["recommended"] != e["seen"]
        }
        if trial and trial["fix"] in ("dataloader", "storage"):
            tried = dict(trial["settings"])
    fix = {"loader": "", "writes": "writes", "saves": "saves"}.get(kind, "")
    # The prediction is for the recommended settings, the trial's for the ones it kept (the fastest it
    # tried): each is judged against the truth of its own settings, measured in the same alternation.
    variants = {"recommended": recommended or None, "tried": tried or None} if kind == "loader" else {"fix": {}}
    variants = {variant: v for variant, v in variants.items() if v is not None}
    if kind == "loader" and variants.get("tried") == variants.get("recommended"):
        variants.pop("tried")
    ratios: dict[str, list[float]] = {variant: [] for variant in variants}
    for _ in range(repeats):  # alternating: before, each fix, before, each fix...
        before = run_rate(script, [str(steps)], env)
        for variant, settings in variants.items():
            # the healthy job has no fix: its "after" is the unchanged script again (the run-to-run noise)
            ratios[variant].append(run_rate(script, [str(steps), repr(settings), fix], env) / before)
    pred_ratios = ratios.get("recommended", ratios.get("fix", [1.0]))
    trial_ratios = ratios.get("tried", pred_ratios)
    return {
        "job": name,
        "truth": statistics.median(pred_ratios),
        "truth_range": (min(pred_ratios), max(pred_ratios)),
        "trial_truth": statistics.median(trial_ratios),
        "trial_truth_range": (min(trial_ratios), max(trial_ratios)),
        "finding": top["check"] if top else "-",
        "predicted": top["expected_speedup"] if top and top["expected_speedup"] else 1.0,
        "trial": trial["measured_speedup"] if trial else None,
        "trial_spread": trial["spread"] if trial else [],
        "settings": recommended or ({"fix": kind} if kind not in ("loader", "none") else {}),
        "tried": tried,
        "verdict": rep["verdict"]["sentence"],
    }


def err(value: float | None, truth: float) -> float | None:
    return None if value is None else value / truth - 1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
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
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        "| job | finding | truth, recommended (range) | predicted (err) | truth, tried (range) | trial (spread; err) | fix |"
    )
    print("|---|---|---|---|---|---|---|")
    trial_errs, pred_errs = [], []
    for r in rows:
        pe, te = err(r["predicted"], r["truth"]), err(r["trial"], r["trial_truth"])
        pred_errs.append(abs(pe))
        trial = "no trial"
        if r["trial"] is not None:
            trial_errs.append(abs(te))
            spread = f"{r['trial_spread'][0]:.2f}–{r['trial_spread'][1]:.2f}; " if r["trial_spread"] else ""
            trial = f"{r['trial']:.2f}× ({spread}{te:+.0%})"
        lo, hi = r["truth_range"]
        tlo, thi = r["trial_truth_range"]
        fix = ", ".join(f"{k}={v}" for k, v in r["settings"].items()) or "-"
        if r["tried"] and r["tried"] != r["settings"]:
            fix += "; tried " + ", ".join(f"{k}={v}" for k, v in r["tried"].items())
        print(
            f"| {r['job']} | {r['finding']} | {r['truth']:.2f}× ({lo:.2f}–{hi:.2f}) | {r['predicted']:.2f}× ({pe:+.0%}) | "
            f"{r['trial_truth']:.2f}× ({tlo:.2f}–{thi:.2f}) | {trial} | {fix} |"
        )
    if trial_errs:
        print(
            f"trial error: median {statistics.median(trial_errs):.0%}, worst {max(trial_errs):.0%} (targets 10%, 20%)"
        )
    if pred_errs:
        print(f"prediction error: median {statistics.median(pred_errs):.0%}, worst {max(pred_errs):.0%} (target 15%)")


if __name__ == "__main__":
    main()

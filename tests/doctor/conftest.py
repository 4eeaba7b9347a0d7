from __future__ import annotations

import json
import os
from typing import Any

import pytest

ZOO = os.path.join(os.path.dirname(__file__), "zoo")


def zoo(name: str) -> str:
    return os.path.join(ZOO, name)


class DoctorRun:
    def __init__(self, proc: Any, out: str) -> None:
        self.proc = proc
        self.out = out

    @property
    def report(self) -> dict[str, Any]:
        with open(os.path.join(self.out, "report.json")) as fh:
            return json.load(fh)

    @property
    def record(self) -> dict[str, Any]:
        with open(os.path.join(self.out, "record.json")) as fh:
            return json.load(fh)


@pytest.fixture
def zoo_path():
    return zoo


@pytest.fixture
def doctor(tmp_path, cli, no_trial):
    def run(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> DoctorRun:
        out = str(tmp_path / "report")
        proc = cli(["doctor", "--out", out, *no_trial(args), *args], cwd=cwd or str(tmp_path), env=env)
        return DoctorRun(proc, out)

    return run


def check_words_follow_figures(report: dict[str, Any], console: str) -> None:
    """No sentence contradicts a figure beside it: every quoted interval holds its point, and where a
    loader trial measured faster, the fix text and the recommended settings name what it kept."""
    import re

    texts = [report["verdict"]["sentence"], console.replace("\n", " ")]
    texts += [f["evidence"] + " " + f["fix"] for f in report["findings"]]
    quoted = 0
    for text in texts:
        for point, lo, hi in re.findall(
            r"measured (\d+\.\d+)×(?:(?!measured).){0,240}?95% interval (\d+\.\d+)–(\d+\.\d+)×", text
        ):
            assert float(lo) <= float(point) <= float(hi), (point, lo, hi, text)
            quoted += 1
    for t in report["trials"]:
        if t["measured_speedup"] is not None and len(t["spread"]) == 2:
            assert t["spread"][0] <= t["measured_speedup"] <= t["spread"][1], t
    loader = next(
        (t for t in report["trials"] if t["fix"] in ("dataloader", "storage") and t["measured_speedup"] is not None),
        None,
    )
    if loader is None or not report["findings"]:
        return
    assert quoted, "a measured trial is quoted with its interval"
    workers = loader["settings"]["num_workers"]
    top = next((f for f in report["findings"] if f["check"] in ("dataloader", "storage")), None)
    faster = len(loader["spread"]) == 2 and loader["spread"][0] > 1.0
    if faster and top is not None:
        assert f"num_workers={workers}" in top["fix"], (workers, top["fix"])
        assert report["dataloader_recommended"]["num_workers"]["recommended"] == workers
        for past in re.findall(r"[Pp]ast (\d+) workers? the rate is capped", top["fix"]):
            assert int(past) >= workers, top["fix"]
    elif top is not None:
        assert report["dataloader_recommended"]["num_workers"]["recommended"] == loader_seen(report)
        assert "No gain measured" in top["fix"], top["fix"]


def loader_seen(report: dict[str, Any]) -> Any:
    return report["dataloader_recommended"]["num_workers"]["seen"]

"""A record.json written by the doctor before the typed record still loads, and analyses to the same report."""

from __future__ import annotations

import json
import os
from typing import Any

from supplyline.analyze.report import build_report
from supplyline.collect.events import LoaderInfo, SamplerInfo
from supplyline.collect.samples import Sample
from supplyline.fixes import snippets
from supplyline.record import RunRecord, load_record

HERE = os.path.join(os.path.dirname(__file__), "fixtures")
OLD_RECORD = os.path.join(HERE, "record_v1_demo.json")  # supplyline 0.1 doctor on the bundled demo, 30 steps
OLD_REPORT = os.path.join(HERE, "report_v1_demo.json")  # the report the same code derived from it


def _without_code(value: Any) -> Any:
    """Source text is read from the script's file at analysis time; that file is not in the fixture."""
    if isinstance(value, dict):
        return {k: _without_code(v) for k, v in value.items() if k != "code"}
    if isinstance(value, list):
        return [_without_code(v) for v in value]
    return value


def test_old_record_loads_as_typed_objects() -> None:
    record = load_record(OLD_RECORD)
    assert isinstance(record.loaders[0], LoaderInfo) and record.train_loader is not None
    assert isinstance(record.sampler, SamplerInfo)
    assert record.monitor.samples and isinstance(record.monitor.samples[0], Sample)
    assert record.monitor.samples[0].cpu.busy_pct >= 0


def _contains(new: Any, old: Any) -> bool:
    """Every value of ``old`` is in ``new`` unchanged; ``new`` may add fields (with their defaults)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _contains(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(_contains, new, old))
    return new == old


def test_old_record_round_trips() -> None:
    with open(OLD_RECORD, encoding="utf-8") as fh:
        data = json.load(fh)
    assert _contains(RunRecord.from_dict(data).to_dict(), data)


# What the report says differently on purpose since the fixture was written: one input finding with
# its causes (not dataloader + preprocessing), one observed rate (the step line's), the replay note.
# The verdict's quoted gain too: the capacity model now counts the cores other processes took while
# the fixture ran (the host was 100% busy: 1.7x became 1.3x); its bound is unchanged.
CHANGED_ON_PURPOSE = {"findings", "notes", "verdict"}
CHANGED_WHATIF = {"label", "observed_steps_per_s", "consumer_bound_speedup"}


def test_old_record_gives_the_same_report() -> None:
    with open(OLD_REPORT, encoding="utf-8") as fh:
        old = json.load(fh)
    new = json.loads(json.dumps(build_report(load_record(OLD_RECORD), snippets).to_dict()))
    verdict, old_findings = old["verdict"], old["findings"]
    for key in CHANGED_ON_PURPOSE:
        old.pop(key)
    for key in CHANGED_WHATIF:
        old["whatif"].pop(key)
    assert _contains(_without_code(new), _without_code(old))  # new fields may be added, none changed
    assert new["verdict"]["bound"] == verdict["bound"] == "input"
    # the old report's two input findings are one now, with the same share
    (finding,) = new["findings"]
    assert finding["check"] == "dataloader" and len(finding["causes"]) == 2
    assert finding["share_of_step_time"] == old_findings[0]["share_of_step_time"]
    assert 1.05 <= finding["expected_speedup"] < old_findings[0]["expected_speedup"]  # the crowded host counted
    assert new["whatif"]["observed_steps_per_s"] == new["steps"]["steps_per_s"]

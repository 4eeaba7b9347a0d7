"""trace.json, validated strictly (the perfetto package's trace processor needs a download, so we
check the Chrome trace event format ourselves): required keys per event type, slices nested in
their step, counters numeric, processes and threads named."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from supplyline.analyze.breakdown import breakdown
from supplyline.record import RunRecord
from supplyline.render.trace import build_trace

REQUIRED = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid", "cat"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "M": {"name", "ph", "pid", "tid", "args"},
}
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index"}


def validate(trace: dict[str, Any]) -> dict[str, Any]:
    """Raise AssertionError on any malformed event; return the events grouped for further checks."""
    assert isinstance(trace["traceEvents"], list) and trace["displayTimeUnit"] in ("ms", "ns")
    json.dumps(trace, allow_nan=False)  # strict JSON: no NaN/Infinity anywhere
    steps, phases, counters, names = [], [], [], {}
    for ev in trace["traceEvents"]:
        ph = ev["ph"]
        assert ph in REQUIRED, ev
        missing = REQUIRED[ph] - ev.keys()
        assert not missing, (missing, ev)
        assert isinstance(ev["pid"], int) and isinstance(ev.get("tid", 0), int)
        if ph == "X":
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0 and ev["dur"] >= 0, ev
            (steps if ev["cat"] == "step" else phases).append(ev)
        elif ph == "C":
            assert ev["args"] and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in ev["args"].values()
            ), ev
            counters.append(ev)
        else:
            assert ev["name"] in METADATA, ev
            value = ev["args"][METADATA[ev["name"]]]
            assert isinstance(value, str if ev["name"] != "process_sort_index" else int), ev
            names[(ev["name"], ev["pid"], ev["tid"])] = value
    # Phases nest in exactly one step on the same track, and never overlap each other.
    for p in phases:
        parents = [
            s
            for s in steps
            if s["pid"] == p["pid"]
            and s["tid"] == p["tid"]
            and s["ts"] <= p["ts"]
            and p["ts"] + p["dur"] <= s["ts"] + s["dur"]
        ]
        assert len(parents) == 1, p
    ordered = sorted(phases, key=lambda p: p["ts"])
    for a, b in itertools.pairwise(ordered):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-6, (a, b)
    ordered_steps = sorted(steps, key=lambda s: s["ts"])
    for a, b in itertools.pairwise(ordered_steps):
        assert a["ts"] + a["dur"] <= b["ts"] + 1, (a, b)  # 1 µs: each end is rounded on its own
    for ev in steps + phases + counters:
        assert ("process_name", ev["pid"], 0) in names, f"pid {ev['pid']} has no name"
    for ev in steps + phases:
        assert ("thread_name", ev["pid"], ev["tid"]) in names
    return {"steps": steps, "phases": phases, "counters": counters, "names": names}


def test_doctor_trace_is_valid(base_run: str, base_record: RunRecord) -> None:
    trace = json.load(open(os.path.join(base_run, "trace.json")))
    got = validate(trace)
    assert len(got["steps"]) == len(base_record.steps["start_s"])
    assert {s["name"] for s in got["steps"]} == {"warm-up step", "step", "what-if step (compute-only replay)"}
    assert {p["name"] for p in got["phases"]} >= {"data_wait", "compute"}
    assert "training thread" in got["names"].values()


def test_trace_counters_and_named_workers(monitored_record: RunRecord) -> None:
    got = validate(build_trace(monitored_record, breakdown(monitored_record)))
    names = {c["name"] for c in got["counters"]}
    assert {
        "CPU busy (%)",
        "CPU per core (%)",
        "memory (GiB)",
        "disk nvme0n1 (MB/s)",
        "disk nvme0n1 util (%)",
        "GPU0 util (%)",
        "CPU (% of a core)",
    } <= names
    assert got["names"][("process_name", 5000, 0)] == "DataLoader worker 5000"
    assert got["names"][("process_name", 5001, 0)] == "DataLoader worker 5001"
    assert any(c["pid"] == 4242 for c in got["counters"])  # the trainer's real pid, from the monitor
    assert {s["pid"] for s in got["steps"]} == {4242}
    per_core = next(c for c in got["counters"] if c["name"] == "CPU per core (%)")
    assert set(per_core["args"]) == {"core0", "core1"}


def test_validator_rejects_a_phase_outside_its_step(base_record: RunRecord) -> None:
    trace = build_trace(base_record, breakdown(base_record))
    phase = next(e for e in trace["traceEvents"] if e.get("cat") == "phase")
    phase["dur"] += 1e7
    try:
        validate(trace)
    except AssertionError:
        return
    raise AssertionError("a phase slice past its step's end was accepted")

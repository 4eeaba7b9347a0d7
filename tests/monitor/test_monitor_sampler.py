"""The Monitor: JSONL and CSV logs, the summary, errors that must not reach the caller."""

from __future__ import annotations

import csv
import json
import threading
import time
import warnings

import pytest

from supplyline.collect.sampler import Monitor
from supplyline.collect.samples import CpuSample, MemorySample, ProcessSample, Sample, flatten
from supplyline.collect.summary import percentile, summarize, unit_of
from supplyline.errors import UserError


def _wait_for_samples(monitor: Monitor, count: int) -> None:
    while monitor.sample_count < count:  # hang guard is the test run's own timeout
        time.sleep(0.02)


def test_jsonl_is_flushed_every_sample_and_parses(tmp_path) -> None:
    log = tmp_path / "samples.jsonl"
    with Monitor(interval=0.1, log=str(log), gpu=False) as monitor:
        _wait_for_samples(monitor, 3)
        seen = monitor.sample_count
        # Read while the monitor still runs: every sample already taken is on disk, whole.
        lines = log.read_text().splitlines()
        assert len(lines) >= seen
        for line in lines:
            json.loads(line)
    lines = log.read_text().splitlines()
    assert len(lines) == monitor.sample_count
    for line, sample in zip(lines, monitor.samples):
        record = json.loads(line)
        assert record == json.loads(json.dumps(sample.to_dict()))
        assert set(record) == {"time_unix_s", "elapsed_s", "cpu", "memory", "disks", "gpus", "processes"}
        assert record["processes"][0]["role"] == "root"
    assert monitor.sampler_cpu_s > 0


def test_csv_has_one_row_per_sample_with_host_columns(tmp_path) -> None:
    path = tmp_path / "samples.csv"
    with Monitor(interval=0.1, log=None, csv=str(path), gpu=False) as monitor:
        _wait_for_samples(monitor, 2)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == monitor.sample_count
    assert float(rows[0]["cpu.busy_pct"]) == pytest.approx(monitor.samples[0].cpu.busy_pct)
    assert "tree.cpu_pct" in rows[0] and "cpu.core0.busy_pct" in rows[0]


def test_unwritable_log_is_a_user_error_at_start(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monitor = Monitor(log=str(blocker / "samples.jsonl"))
    with pytest.raises(UserError, match="cannot write"):
        monitor.start()
    assert not monitor.running


def test_on_sample_sees_every_sample_on_the_sampling_thread() -> None:
    seen: list[tuple[float, str]] = []
    monitor = Monitor(
        interval=0.05,
        log=None,
        gpu=False,
        on_sample=lambda s: seen.append((s.elapsed_s, threading.current_thread().name)),
    )
    with monitor:
        _wait_for_samples(monitor, 3)
    assert [t for t, _ in seen] == [s.elapsed_s for s in monitor.samples]
    assert {name for _, name in seen} == {"supplyline-monitor"}


def test_interval_must_be_positive() -> None:
    with pytest.raises(UserError, match="interval"):
        Monitor(interval=0)


def test_watches_the_current_process_by_default() -> None:
    import os

    with Monitor(interval=0.1, log=None, gpu=False) as monitor:
        _wait_for_samples(monitor, 1)
    assert monitor.pid == os.getpid()
    assert monitor.samples[0].processes[0].pid == os.getpid()


def test_internal_errors_become_one_warning_and_sampling_goes_on() -> None:
    monitor = Monitor(interval=0.05, log=None, gpu=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor.start()
        calls = []

        def broken() -> list:
            calls.append(1)
            raise OSError("simulated /proc failure")

        monitor._tree.read = broken  # type: ignore[union-attr, method-assign]
        while len(calls) < 3:
            time.sleep(0.02)
        monitor.stop()
    ours = [w for w in caught if "supplyline monitor" in str(w.message)]
    assert len(ours) == 1 and "simulated /proc failure" in str(ours[0].message)
    assert monitor.errors >= 3
    assert threading.main_thread().is_alive()


def _sample(t: float, busy: float) -> Sample:
    cpu = CpuSample(
        busy_pct=busy,
        per_core_busy_pct=[busy, busy],
        user_pct=busy,
        system_pct=0.0,
        iowait_pct=0.0,
        load_1m=1.0,
        load_5m=1.0,
        load_15m=1.0,
    )
    mem = MemorySample(
        total_bytes=100,
        used_bytes=int(busy),
        available_bytes=50,
        page_cache_bytes=10,
        swap_used_bytes=0,
        swap_in_bytes_per_s=0.0,
        swap_out_bytes_per_s=0.0,
    )
    return Sample(time_unix_s=1000.0 + t, elapsed_s=t, cpu=cpu, memory=mem)


def test_summary_of_a_known_series() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 100.0]
    summary = summarize([_sample(i, v) for i, v in enumerate(values)])
    busy = summary["cpu.busy_pct"]
    assert busy.mean == pytest.approx(40.0)
    assert busy.max == 100.0
    assert busy.p95 == pytest.approx(88.0)  # between 40 and 100 at rank 3.8 (numpy's default)
    assert busy.unit == "%" and busy.count == 5
    assert summary["memory.used_bytes"].unit == "B"
    assert summary.sample_count == 5 and summary.duration_s == 4.0
    assert summary.get("tree.cpu_pct") is None  # no process tree in these samples


def test_percentile_and_units() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([5.0], 95) == 5.0
    assert unit_of("disk.vda.read_mb_per_s") == "MB/s"
    assert unit_of("proc.12.rss_bytes") == "B"
    assert unit_of("tree.read_bytes_per_s") == "B/s"
    assert unit_of("gpu0.power_w") == "W"


def test_flatten_sums_the_tree_and_names_processes() -> None:
    sample = _sample(0, 1.0)
    sample.processes = [
        ProcessSample(
            pid=1,
            ppid=0,
            name="train",
            role="root",
            cpu_pct=90.0,
            rss_bytes=100,
            status="running",
            read_bytes_per_s=None,
            write_bytes_per_s=5.0,
        ),
        ProcessSample(
            pid=2,
            ppid=1,
            name="worker",
            role="child",
            cpu_pct=50.0,
            rss_bytes=30,
            status="sleeping",
            read_bytes_per_s=10.0,
            write_bytes_per_s=0.0,
        ),
    ]
    flat = flatten(sample, per_process=True)
    assert (flat["tree.cpu_pct"], flat["tree.root_cpu_pct"], flat["tree.children_cpu_pct"]) == (140.0, 90.0, 50.0)
    assert flat["tree.rss_bytes"] == 130 and flat["tree.read_bytes_per_s"] == 10.0
    assert flat["proc.2.cpu_pct"] == 50.0
    assert "proc.2.cpu_pct" not in flatten(sample)


def test_metric_series_feeds_the_oscillation_detector() -> None:
    from supplyline.analyze.oscillation import detect_oscillation
    from supplyline.collect.summary import metric_series

    samples = [_sample(i * 0.5, 100.0 if i % 6 < 3 else 0.0) for i in range(48)]
    times, values = metric_series(samples, "cpu.busy_pct")
    assert times[:3] == [0.0, 0.5, 1.0] and values[:4] == [100.0, 100.0, 100.0, 0.0]
    result = detect_oscillation(values, timestamps=times)
    assert result.oscillates and result.period_s == pytest.approx(3.0)
    assert metric_series(samples, "gpu0.util_pct") == ([], [])


def _numeric(hint: type) -> tuple[type, ...]:
    # JSON has one number type: a float field may hold an int (0 rather than 0.0).
    return (float, int) if hint is float else (hint,)


def test_contract_every_field_has_its_promised_type() -> None:
    """psutil-style contract: the public Monitor's samples carry the types the dataclasses declare."""
    import dataclasses
    import typing

    import supplyline
    from supplyline.collect import samples as samples_module

    with supplyline.Monitor(interval=0.05, log=None) as monitor:
        _wait_for_samples(monitor, 1)
    sample = monitor.samples[0]
    checked = 0

    def check(obj: object) -> None:
        nonlocal checked
        hints = typing.get_type_hints(type(obj), vars(samples_module))
        for f in dataclasses.fields(obj):  # type: ignore[arg-type]
            value, hint = getattr(obj, f.name), hints[f.name]
            optional = type(None) in typing.get_args(hint)
            if optional:
                hint = next(a for a in typing.get_args(hint) if a is not type(None))
            if value is None:
                assert optional, f.name
            elif typing.get_origin(hint) is list:
                (item_type,) = typing.get_args(hint)
                assert isinstance(value, list), f.name
                assert all(dataclasses.is_dataclass(v) or isinstance(v, _numeric(item_type)) for v in value), f.name
            else:
                assert isinstance(value, _numeric(hint)), (f.name, value)
            checked += 1
            for item in value if isinstance(value, list) else [value]:
                if dataclasses.is_dataclass(item):
                    check(item)

    check(sample)
    assert checked > 30


def test_the_monitor_imports_without_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, supplyline; supplyline.Monitor; import supplyline.commands.monitor, supplyline.commands.demo; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"

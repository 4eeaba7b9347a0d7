"""report.html without a browser: self-contained, data embedded safely, every user string escaped."""

from __future__ import annotations

import json
import os
import re

from reports_helpers import XSS, without_monitor

from supplyline.analyze.breakdown import breakdown
from supplyline.analyze.report import build_report
from supplyline.record import RunRecord
from supplyline.render.html import PLOTS, build_html, embed_json, script_hash
from supplyline.render.html_assets import SCRIPT
from supplyline.render.html_data import plot_data


def _data_block(page: str) -> str:
    m = re.search(r'<script type="application/json" id="supplyline-data">(.*?)</script>', page, re.S)
    assert m, "no embedded data block"
    return m.group(1)


def test_doctor_writes_report_html(base_run: str) -> None:
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>")
    assert 'data-plot="steps"' in page and 'id="findings"' in page


def test_page_needs_no_network(monitored_record: RunRecord) -> None:
    page = build_html(build_report(monitored_record), monitored_record)
    assert not re.search(r"\s(src|href)\s*=", page), "the page must not load anything"
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "connect-src &#x27;none&#x27;" in csp and script_hash(SCRIPT) in csp


def test_data_block_round_trips_and_cannot_close_itself(monitored_record: RunRecord) -> None:
    hostile = {"a": "</script><script>alert(1)</script>", "b": "<!-- x", "c": "&amp; \u2028", "n": float("nan")}
    text = embed_json(hostile)
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {**hostile, "n": None}
    page = build_html(build_report(monitored_record), monitored_record)
    block = _data_block(page)
    data = json.loads(block)
    assert data["steps"]["start_s"] == monitored_record.steps["start_s"]
    assert len(data["monitor"]["t_s"]) == len(monitored_record.monitor.samples)


def test_user_strings_are_escaped(base_run: str) -> None:
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the path is shown, as text
    assert len(re.findall(r"<script\b", page)) == 2  # the data block and the page's own script


def test_every_plot_has_a_figure(monitored_record: RunRecord) -> None:
    page = build_html(build_report(monitored_record), monitored_record)
    for key, _ in PLOTS:
        assert f'data-plot="{key}"' in page
    for key in ("histogram", "whatif"):
        assert f'data-plot="{key}"' in page


def test_plot_data_aligns_monitor_with_steps(monitored_record: RunRecord) -> None:
    d = plot_data(monitored_record, breakdown(monitored_record))
    m = d["monitor"]
    n = len(m["t_s"])
    t0 = monitored_record.monitor.t0_unix_s
    samples = monitored_record.monitor.samples
    assert m["t_s"] == [s.time_unix_s - t0 for s in samples]  # the steps' axis: seconds since the start
    assert len(m["cpu_cores"]) == 2 and all(len(c) == n for c in m["cpu_cores"])
    late = next(w for w in m["workers"] if w["pid"] == 5001)
    assert late["cpu"][0] is None and late["cpu"][-1] == 70.0  # absent before it started, not 0
    assert next(x["device"] for x in m["disks"]) == "nvme0n1"  # busiest first
    assert m["gpus"][0]["util_pct"][0] == 20.0
    kinds = d["steps"]["kind"]
    assert kinds[0] == "warmup" and "observed" in kinds and kinds[-1] == "whatif"
    observed = [i for i, k in enumerate(kinds) if k == "observed"]
    i = observed[0]
    total = sum(d["steps"]["phases_ms"][p][i] for p in d["phases"]["order"])
    assert abs(total - d["steps"]["duration_ms"][i]) < 1e-6 * max(total, 1)
    assert sum(d["histogram"]["counts"]) == len(observed)


def test_real_monitor_samples_are_plotted(base_record: RunRecord) -> None:
    d = plot_data(base_record, breakdown(base_record))
    assert len(d["monitor"]["t_s"]) == len(base_record.monitor.samples) > 0
    assert d["monitor"]["cpu_cores"] and d["monitor"]["trainer_cpu"][-1] is not None


def test_missing_monitor_is_a_note_not_an_error(base_record: RunRecord) -> None:
    bare = without_monitor(base_record)
    d = plot_data(bare, breakdown(bare))
    assert d["monitor"]["t_s"] == [] and "no host monitor samples" in d["monitor"]["note"]
    assert "test record without one" in d["monitor"]["note"]
    build_html(build_report(bare), bare)  # renders


def test_dataloader_seen_and_recommended(base_run: str) -> None:
    report = json.load(open(os.path.join(base_run, "report.json")))
    rec = report["dataloader_recommended"]
    assert rec["num_workers"]["seen"] == 0
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    assert '<table id="dataloader">' in page and "recommended" in page

"""report.html in a real browser (Debian chromium, headless): it draws, logs no console error, and a
script path containing <script>alert(1)</script> executes nothing."""

from __future__ import annotations

import os
import re

import pytest
from reports_browser import chromium, load
from reports_helpers import XSS, with_monitor, without_monitor

from supplyline.analyze.report import build_report
from supplyline.record import RunRecord
from supplyline.render.html import PLOTS, build_html

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None, reason="needs Debian chromium (apt-get install chromium; .ci/run does)"),
]

# A test-only first script: turns any alert() into a DOM marker that --dump-dom shows.
ALERT_TRAP = (
    "<script>window.alert=function(m){document.documentElement.setAttribute('data-alerted',String(m));};</script>"
)


def _write(tmp_path, name: str, page: str) -> str:
    path = os.path.join(str(tmp_path), name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page)
    return path


def _without_csp(page: str) -> str:
    """The CSP would block an injected inline script by itself; remove it to test the escaping alone."""
    return re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)


def test_report_draws_every_plot_without_console_errors(tmp_path, monitored_record: RunRecord) -> None:
    page = _write(tmp_path, "report.html", build_html(build_report(monitored_record), monitored_record))
    got = load(page)
    assert got.console == [], got.console
    body = got.dom.find("body")[0]
    assert body.attrs.get("data-rendered") == "ok", "".join(got.dom.by_id("render-errors").text)
    for key, _ in PLOTS:
        fig = got.dom.find("figure", data_plot=key)[0]
        assert fig.attrs.get("data-drawn") == "yes", key
    steps = monitored_record.steps["start_s"]
    assert len(got.dom.find("rect", figure="steps", **{"class": "bar"})) >= len(steps)
    assert len(got.dom.find("path", figure="cpu", **{"class": "series"})) == 2  # one line per core
    assert len(got.dom.find("path", figure="workers", **{"class": "series"})) == 3  # trainer + 2 workers
    assert len(got.dom.find("path", figure="gpu", **{"class": "series"})) == 1
    assert len(got.dom.find("rect", figure="whatif", **{"class": "bar"})) == 3
    assert len(got.dom.find("rect", figure="histogram", **{"class": "bar"})) >= 1


def test_missing_monitor_and_gpu_degrade_to_notes(tmp_path, base_record: RunRecord) -> None:
    no_gpu = with_monitor(base_record, gpus=0, workers=0)
    for name, record in (("bare.html", without_monitor(base_record)), ("nogpu.html", no_gpu)):
        got = load(_write(tmp_path, name, build_html(build_report(record), record)))
        assert got.console == [], got.console
        assert got.dom.find("body")[0].attrs.get("data-rendered") == "ok"
        gpu = got.dom.find("figure", data_plot="gpu")[0]
        assert gpu.attrs.get("data-drawn") == "empty"
        note = got.dom.find("p", figure="gpu", **{"class": "nodata"})
        assert note and "not available" in "".join(note[0].text)
    assert got.dom.find("figure", data_plot="cpu")[0].attrs.get("data-drawn") == "yes"


def test_real_doctor_report_draws(tmp_path, base_run: str) -> None:
    """The page the doctor wrote, with the real host monitor's samples."""
    got = load(os.path.join(base_run, "report.html"))
    assert got.console == [], got.console
    assert got.dom.find("body")[0].attrs.get("data-rendered") == "ok"
    for key in ("steps", "cpu", "workers", "memory", "histogram", "whatif"):
        assert got.dom.find("figure", data_plot=key)[0].attrs.get("data-drawn") == "yes", key


def test_script_path_with_script_tag_executes_nothing(tmp_path, base_run: str) -> None:
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    assert XSS.replace("<", "&lt;").replace(">", "&gt;") in page
    trapped = _without_csp(page).replace("<head>", "<head>" + ALERT_TRAP, 1)
    got = load(_write(tmp_path, "xss.html", trapped))
    assert got.dom.find("html")[0].attrs.get("data-alerted") is None
    assert got.dom.find("body")[0].attrs.get("data-rendered") == "ok"
    assert len(got.dom.find("script")) == 3  # the trap, the data block, the page's script: nothing injected
    shown = "".join(got.dom.find("code", **{"class": "target"})[0].text)
    assert XSS in shown  # displayed as text


def test_the_alert_trap_does_catch_an_injection(tmp_path, base_run: str) -> None:
    """Control: the same check fails on a page where the path was NOT escaped."""
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    unescaped = page.replace(XSS.replace("<", "&lt;").replace(">", "&gt;"), XSS)
    trapped = _without_csp(unescaped).replace("<head>", "<head>" + ALERT_TRAP, 1)
    got = load(_write(tmp_path, "control.html", trapped))
    assert got.dom.find("html")[0].attrs.get("data-alerted") == "1"


def test_csp_blocks_injected_scripts_too(tmp_path, base_run: str) -> None:
    """Defence in depth: with the page's own CSP, even an unescaped injection does not run."""
    page = open(os.path.join(base_run, "report.html"), encoding="utf-8").read()
    unescaped = page.replace(
        XSS.replace("<", "&lt;").replace(">", "&gt;"), XSS.replace("alert(1)", "document.title='pwned'")
    )
    got = load(_write(tmp_path, "csp.html", unescaped))
    assert "pwned" not in "".join(got.dom.find("title")[0].text)
    assert any("Content Security Policy" in m for m in got.console)
    assert got.dom.find("body")[0].attrs.get("data-rendered") == "ok"

"""report.html: one self-contained page (no CDN, no network) with the report's text and plots.

Text sections are written here with every user-world string (paths, arguments, source lines,
evidence that quotes them) passed through ``html.escape``. The plots are drawn in the browser by
the inline script from a ``<script type="application/json">`` block in which every ``<`` is
written ``\\u003c``, so no string in the data can close the block. A Content-Security-Policy
allows only that one script (by its hash) and no network at all.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import time
from typing import Any

from supplyline import phases as P
from supplyline.analyze.breakdown import SourceLine
from supplyline.analyze.checks import library_label
from supplyline.analyze.report import Report
from supplyline.analyze.stats import share_text
from supplyline.record import RunRecord
from supplyline.render.html_assets import SCRIPT, STYLE
from supplyline.render.html_data import finite, plot_data
from supplyline.typed import to_plain

# (data-plot key, caption); the time plots share one x axis: seconds since the run started.
PLOTS = (
    ("steps", "Step time, stacked by phase (ms) — each bar is one step at its place in time"),
    ("cpu", "CPU busy per core (%)"),
    ("workers", "CPU of the training process and each DataLoader worker (% of one core)"),
    ("memory", "Memory (GiB)"),
    ("disk", "Disk throughput (MB/s)"),
    ("disk_util", "Disk %util"),
    ("gpu", "GPU utilization (%)"),
)


def e(value: Any) -> str:
    """Escape anything for HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def embed_json(data: Any) -> str:
    text = json.dumps(finite(data), allow_nan=False, separators=(",", ":"))
    # "<" never appears literally, so neither "</script" nor "<!--" can end or alter the block.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def build_html(report: Report, record: RunRecord) -> str:
    data = plot_data(record, report.breakdown)
    data["whatif"] = to_plain(report.whatif)
    csp = (
        f"default-src 'none'; script-src '{script_hash(SCRIPT)}'; style-src 'unsafe-inline'; "
        "img-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'"
    )
    name = os.path.basename(report.target.name) or report.target.name
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>supplyline report — {e(name)}</title>",
        f"<style>{STYLE}</style></head><body>",
        _header(record, report),
        _verdict(report),
        _gpu_idle(report),
        _time_plots(),
        _whatif(report),
        _findings(report),
        _dataloader(report),
        _top_lines(report),
        _notes(report),
        '<pre id="render-errors"></pre>',
        f'<script type="application/json" id="supplyline-data">{embed_json(data)}</script>',
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _header(record: RunRecord, report: Report) -> str:
    t, o, h = report.target, report.outcome, record.host
    cmd = " ".join([t.name, *t.args])
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.created_unix_s))
    how = o.stop_message or o.reason
    return (
        f"<h1>supplyline report — {e(os.path.basename(t.name) or t.name)}</h1>"
        f'<p class="meta"><span>{e(t.kind)}: <code class="target">{e(cmd)}</code></span></p>'
        f'<p class="meta"><span>cwd <code>{e(t.cwd)}</code></span><span>{e(when)}</span>'
        f"<span>outcome: {e(how)} (exit {e(o.exit_code)}, {o.wall_s:.1f} s)</span></p>"
        f'<p class="meta"><span>{e(h.platform)}</span><span>{h.cpu_count} cores</span>'
        f"<span>torch {e(h.torch_version)} ({h.torch_threads} threads)</span>"
        f"<span>GPU: {e(', '.join(h.gpu_names) or 'not available')}</span></p>"
    )


def _verdict(report: Report) -> str:
    v, s = report.verdict, report.steps
    out = [f'<div class="verdict b-{e(v.bound)}" id="verdict"><strong>{e(v.bound)}</strong> — {e(v.sentence)}</div>']
    if s.observed:
        rate = f" · {s.samples_per_s:.1f} samples/s" if s.samples_per_s else ""
        warm = f" (first {s.warmup_excluded} excluded as warm-up)" if s.warmup_excluded else ""
        out.append(
            f"<p>Step time median <b>{s.step_ms_median:.1f} ms</b> · mean {s.step_ms_mean:.1f} ms · "
            f"p95 {s.step_ms_p95:.1f} ms · {s.steps_per_s:.2f} steps/s{rate} · "
            f"{s.observed} steps observed{warm}</p>"
        )
        rows = "".join(
            f'<tr><td>{e(P.label(p))}</td><td class="num">{share * 100:.1f}%</td>'
            f'<td class="num">{report.phase_ms_per_step[p]:.2f} ms</td></tr>'
            for p, share in report.phase_share.items()
        )
        out.append(
            f'<table id="phases"><tr><th>phase</th><th class="num">share</th><th class="num">per step</th></tr>{rows}</table>'
        )
    return "\n".join(out)


def _gpu_idle(report: Report) -> str:
    """The GPU's own idle time (CUDA events) beside the CPU split; nothing when it was not measured."""
    g = report.gpu_idle
    if g is None or g.idle_share is None:
        return ""
    phase = P.BY_NAME[P.GPU_IDLE]
    rows = "".join(
        f'<tr><td>{e(P.label(k) if k in P.BY_NAME else k)}</td><td class="num">{v * 100:.1f}%</td>'
        f'<td class="num">{g.host_phase_share.get(k, 0.0) * 100:.1f}%</td></tr>'
        for k, v in sorted(g.by_phase_share.items(), key=lambda kv: -kv[1])
    )
    facts = [f"{g.steps_measured} steps measured by two CUDA events each"]
    if g.cpu_ahead_ms is not None:
        facts.append(f"the CPU ran ahead by {g.cpu_ahead_ms:.1f} ms (median)")
    if g.util_mean_pct is not None:
        facts.append(f"NVML utilization {g.util_mean_pct:.0f}%" + (" (periodic drops)" if g.util_sawtooth else ""))
    if g.note:
        facts.append(g.note)
    return (
        f'<h2><span class="sw" style="background:{e(phase.colour)}"></span> {e(phase.long_label)}</h2>'
        f'<p id="gpu-idle">The GPU sat idle <b>{g.idle_share * 100:.1f}%</b> of the observed steps\' time '
        f"({g.idle_ms_per_step or 0.0:.2f} ms per step). By the host phase it waited for, beside the training "
        f'thread\'s own time in each:</p><p class="meta">{e(" · ".join(facts))}</p>'
        '<table id="gpu-idle-causes"><tr><th>host phase</th><th class="num">GPU idle</th>'
        f'<th class="num">CPU side</th></tr>{rows}</table>'
    )


def _figure(key: str, caption: str) -> str:
    return (
        f'<figure class="plot" data-plot="{key}" id="plot-{key}"><figcaption>{e(caption)}</figcaption>'
        '<div class="plot-body"></div></figure>'
    )


def _time_plots() -> str:
    figs = "".join(_figure(k, c) for k, c in PLOTS)
    return (
        '<h2>Over time</h2><p class="meta">All plots share one time axis (seconds since the run started); '
        f"move the mouse over one to read every plot at that instant.</p>{figs}"
        "<h2>Step-time distribution</h2>" + _figure("histogram", "Observed steps by duration")
    )


def _whatif(report: Report) -> str:
    w = report.whatif
    gain = f'<p id="whatif-claim">{e(w.claim[0].upper() + w.claim[1:])}.</p>' if w.claim else ""
    return f'<h2>What-if</h2><p class="meta">{e(w.label)}</p>' + _figure("whatif", "Steps per second") + gain


def _findings(report: Report) -> str:
    if not report.findings:
        return f'<h2>Findings</h2><p id="findings">{e(report.no_findings_sentence)}</p>'
    cards = []
    for i, f in enumerate(report.findings, 1):
        gain = f" · expected gain {e(f.gain_text())}" if f.expected_speedup else ""
        cards.append(
            f'<div class="finding"><div class="head"><span class="sev-{e(f.severity)}">{i}. {e(f.check)} '
            f"({e(f.severity)})</span> · {f.share_of_step_time * 100:.0f}% of step time{gain}</div>"
            f'<div class="evidence">{e(f.evidence)}</div><div class="fix"><b>Fix:</b> {e(f.fix)}</div></div>'
        )
    return '<h2>Findings</h2><div id="findings">' + "".join(cards) + "</div>"


def _dataloader(report: Report) -> str:
    d, rec = report.dataloader, report.dataloader_recommended
    if not d:
        return '<h2>DataLoader</h2><p id="dataloader">No training DataLoader was identified.</p>'
    rows = "".join(
        f"<tr><td><code>{e(k)}</code></td><td>{e(v['seen'])}</td><td><b>{e(v['recommended'])}</b></td>"
        f"<td>{e(v['why'])}</td></tr>"
        for k, v in (rec or {}).items()
    )
    facts = [
        f"loader {d.loader_type}",
        f"dataset {d.dataset_type}" + (f" of {d.dataset_len} items" if d.dataset_len else ""),
    ]
    if d.stall != "none":  # no stall word when the step did not wait on data
        facts.append(f"stall: {d.stall}")
    if d.time_to_first_batch_s is not None:
        facts.append(f"first batch {d.time_to_first_batch_s * 1e3:.0f} ms")
    if d.worker_cpu_pct_mean is not None:
        facts.append(f"workers {d.worker_cpu_pct_mean:.0f}% of a core each")
    tune = f"<p>Measure instead of guessing: <code>{e(d.tune_command)}</code></p>" if d.tune_command else ""
    return (
        "<h2>DataLoader</h2>"
        f'<p class="meta">{e(" · ".join(facts))}</p>'
        '<table id="dataloader"><tr><th>setting</th><th>as seen</th><th>recommended</th><th>why</th></tr>'
        f"{rows}</table>{tune}"
    )


def _line_share(line: SourceLine) -> str:
    if line.reliable:
        return f"{line.share_of_step_time * 100:.1f}%"
    return f'<span title="{e(share_text(line.samples, line.total_samples))}">? ({line.samples} samples)</span>'


def _top_lines(report: Report) -> str:
    lines = report.top_lines + report.data_wait_lines
    if not lines:
        return '<h2>Source lines</h2><p id="lines">No source lines were sampled inside the steps.</p>'
    rows = "".join(
        f'<tr><td class="num">{_line_share(line)}</td><td>{e(line.phase)}</td>'
        f"<td><code title='{e(line.file)}'>{e(os.path.basename(line.file))}:{e(line.line)}</code>"
        + (f" → <code>{e(library_label(line.library))}</code>" if line.library else "")
        + "</td>"
        f"<td><code>{e(line.function)}</code></td><td><code>{e(line.code)}</code></td></tr>"
        for line in lines
    )
    return (
        '<h2>Source lines</h2><p class="meta">Where the stack sampler found the training thread: time outside '
        'the hooks (other, logging) and inside the DataLoader wait.</p><table id="lines"><tr><th class="num">share'
        f"</th><th>phase</th><th>where</th><th>function</th><th>code</th></tr>{rows}</table>"
    )


def _notes(report: Report) -> str:
    if not report.notes:
        return ""
    return '<h2>Notes</h2><ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>"

"""The report page's stylesheet and script, inline so report.html is one file that needs no network.

The script reads the embedded JSON block and draws every plot as SVG. It writes user-world text
(device names, process names) only through ``textContent``, never markup. It marks
``<body data-rendered>`` when done and lists any drawing error in ``#render-errors``, so a headless
browser test can tell a drawn page from a broken one.
"""

from __future__ import annotations

STYLE = """
:root{--fg:#1d2330;--muted:#667085;--line:#d0d5dd;--bg:#fff;--soft:#f5f7fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0;padding:20px 28px;max-width:1040px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.meta{color:var(--muted);margin:0}.meta span{margin-right:14px}
.verdict{margin:14px 0;padding:12px 14px;border-radius:8px;background:var(--soft);border-left:5px solid #2ca02c}
.verdict.b-input,.verdict.b-transfer,.verdict.b-logging,.verdict.b-checkpoint{border-left-color:#d62728}
.verdict.b-unknown{border-left-color:#e6b800}.verdict strong{text-transform:uppercase}
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:var(--muted);font-weight:600}td.num,th.num{text-align:right}
.finding{border:1px solid var(--line);border-radius:8px;padding:10px 12px;margin:8px 0}
.finding .head{font-weight:600}.sev-high{color:#b42318}.sev-medium{color:#b54708}.sev-low{color:var(--muted)}
.finding .fix{margin-top:6px}.finding .fix b{color:#067647}
.plot{margin:10px 0 18px}.plot figcaption{font-weight:600;margin-bottom:2px}
.chart{width:100%;height:auto;display:block;background:#fff}
.chart text{font-size:11px;fill:#475467}.chart .grid{stroke:#eaecf0}.chart .axis{stroke:#98a2b3}
.chart .cursor{stroke:#101828;stroke-dasharray:3 3;pointer-events:none}
.legend{list-style:none;padding:0;margin:2px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:#344054}
.legend .sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.readout{font-size:12px;color:var(--muted);min-height:1.4em}
.nodata{color:var(--muted);font-style:italic;margin:4px 0}
.notes li{color:var(--muted)}#render-errors{color:#b42318}
"""

SCRIPT = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var D = JSON.parse(document.getElementById("supplyline-data").textContent);
  // The phase table comes from the Python side (supplyline/phases.py) through the embedded JSON.
  var PHASE_COLOR = D.phases.colour;
  var PHASE_LABEL = D.phases.label;
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var W = 900, H = 178, M = {l: 58, r: 14, t: 20, b: 24};
  var T_END = Math.max(D.t_end_s || 0, 1e-3);
  var timePlots = [];

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, String(attrs[k])); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function label(parent, x, y, s, attrs) {
    var t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    t.textContent = s;
    return t;
  }
  function scale(d0, d1, r0, r1) {
    var k = (r1 - r0) / ((d1 - d0) || 1);
    var f = function (v) { return r0 + (v - d0) * k; };
    f.inv = function (p) { return d0 + (p - r0) / k; };
    return f;
  }
  function ticks(lo, hi, n) {
    var span = (hi - lo) || 1, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) { out.push(+v.toPrecision(12)); }
    return out;
  }
  function fmt(v) {
    if (v === null || v === undefined) { return "—"; }
    var a = Math.abs(v);
    if (Number.isInteger(v)) { return String(v); }
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toPrecision(2);
  }
  function body(fig) { return fig.querySelector(".plot-body"); }
  function newSvg(fig, h) {
    var svg = el("svg", {viewBox: "0 0 " + W + " " + (h || H), "class": "chart", role: "img"});
    body(fig).appendChild(svg);
    return svg;
  }
  function noData(fig, msg) {
    var p = document.createElement("p");
    p.className = "nodata";
    p.textContent = msg;
    body(fig).appendChild(p);
    fig.setAttribute("data-drawn", "empty");
  }
  function legend(fig, items) {
    var ul = document.createElement("ul");
    ul.className = "legend";
    items.forEach(function (it) {
      var li = document.createElement("li"), sw = document.createElement("span");
      sw.className = "sw";
      sw.style.background = it.color;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(it.label));
      ul.appendChild(li);
    });
    body(fig).appendChild(ul);
  }
  function axes(svg, sx, sy, yTicks, xTicks, xFmt, h) {
    var bottom = (h || H) - M.b;
    yTicks.forEach(function (v) {
      el("line", {x1: M.l, x2: W - M.r, y1: sy(v), y2: sy(v), "class": "grid"}, svg);
      label(svg, M.l - 6, sy(v) + 4, fmt(v), {"text-anchor": "end"});
    });
    xTicks.forEach(function (v) {
      el("line", {x1: sx(v), x2: sx(v), y1: bottom, y2: bottom + 4, "class": "axis"}, svg);
      label(svg, sx(v), bottom + 16, xFmt(v), {"text-anchor": "middle"});
    });
    el("line", {x1: M.l, x2: W - M.r, y1: bottom, y2: bottom, "class": "axis"}, svg);
    el("line", {x1: M.l, x2: M.l, y1: M.t, y2: bottom, "class": "axis"}, svg);
  }
  function timeAxes(svg, yMax, yUnit) {
    var sx = scale(0, T_END, M.l, W - M.r), sy = scale(0, yMax, H - M.b, M.t);
    axes(svg, sx, sy, ticks(0, yMax, 4), ticks(0, T_END, 10), function (v) { return fmt(v) + " s"; });
    label(svg, 4, 12, yUnit, {});
    return {sx: sx, sy: sy};
  }
  function path(xs, ys, sx, sy) {
    var d = "", pen = false;
    for (var i = 0; i < xs.length; i++) {
      if (ys[i] === null || ys[i] === undefined) { pen = false; continue; }
      d += (pen ? "L" : "M") + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
      pen = true;
    }
    return d;
  }
  function seriesMax(series) {
    var m = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v !== null && v > m) { m = v; } }); });
    return m;
  }
  // A readout line under each time plot and one cursor shared by all of them (the shared time axis).
  function registerTime(fig, svg, sc, describe) {
    var cursor = el("line", {x1: -10, x2: -10, y1: M.t, y2: H - M.b, "class": "cursor"}, svg);
    var out = document.createElement("div");
    out.className = "readout";
    body(fig).appendChild(out);
    var plot = {svg: svg, sc: sc, cursor: cursor, out: out, describe: describe};
    timePlots.push(plot);
    svg.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var t = sc.sx.inv((ev.clientX - r.left) * W / r.width);
      if (t >= 0 && t <= T_END) { moveCursor(t); }
    });
  }
  function moveCursor(t) {
    timePlots.forEach(function (p) {
      var x = p.sc.sx(t);
      p.cursor.setAttribute("x1", x);
      p.cursor.setAttribute("x2", x);
      p.out.textContent = "t = " + fmt(t) + " s · " + p.describe(t);
    });
  }
  function nearest(xs, t) {
    var best = -1, dist = Infinity;
    for (var i = 0; i < xs.length; i++) {
      var d = Math.abs(xs[i] - t);
      if (d < dist) { dist = d; best = i; }
    }
    return best;
  }
  function linePlot(fig, xs, series, yUnit, yMax) {
    series = series.filter(function (s) { return s.values.some(function (v) { return v !== null; }); });
    if (!xs.length || !series.length) { return false; }
    var svg = newSvg(fig);
    var sc = timeAxes(svg, yMax || Math.max(seriesMax(series) * 1.1, 1e-6), yUnit);
    series.forEach(function (s) {
      el("path", {d: path(xs, s.values, sc.sx, sc.sy), fill: "none", stroke: s.color, "stroke-width": 1.5,
                  "class": "series"}, svg);
    });
    legend(fig, series);
    registerTime(fig, svg, sc, function (t) {
      var i = nearest(xs, t);
      return series.map(function (s) { return s.label + " " + fmt(s.values[i]); }).join(" · ");
    });
    fig.setAttribute("data-drawn", "yes");
    return true;
  }
  function colored(list, offset) {
    return list.map(function (s, k) { s.color = PALETTE[(k + (offset || 0)) % PALETTE.length]; return s; });
  }

  var PLOTS = {
    steps: function (fig) {
      var s = D.steps, n = s.start_s.length;
      if (!n) { return noData(fig, "no training steps were recorded"); }
      var observed = s.duration_ms.filter(function (d, i) { return s.kind[i] === "observed"; });
      var yMax = Math.max.apply(null, observed.length ? observed : s.duration_ms) * 1.15;
      var svg = newSvg(fig), sc = timeAxes(svg, yMax, "ms");
      el("clipPath", {id: "clip-steps"}, svg).appendChild(el("rect", {x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b}));
      var g = el("g", {"clip-path": "url(#clip-steps)"}, svg);
      for (var i = 0; i < n; i++) {
        var x = sc.sx(s.start_s[i]), w = Math.max(sc.sx(s.start_s[i] + s.duration_ms[i] / 1e3) - x, 0.8);
        var parts = s.kind[i] === "observed"
          ? D.phases.order.map(function (p) { return [p, s.phases_ms[p][i] || 0]; })
          : [[s.kind[i], s.duration_ms[i]]];
        var base = 0;
        parts.forEach(function (pv) {
          if (pv[1] <= 0) { return; }
          var y0 = sc.sy(base), y1 = sc.sy(base + pv[1]);
          el("rect", {x: x, y: y1, width: w, height: Math.max(y0 - y1, 0.5), fill: PHASE_COLOR[pv[0]], "class": "bar"}, g);
          base += pv[1];
        });
      }
      var kinds = D.phases.order.concat(["warmup", "whatif"]).filter(function (k) {
        return D.phases.order.indexOf(k) >= 0 ? s.phases_ms[k].some(function (v) { return v > 0; }) : s.kind.indexOf(k) >= 0;
      });
      legend(fig, kinds.map(function (k) { return {label: PHASE_LABEL[k], color: PHASE_COLOR[k]}; }));
      registerTime(fig, svg, sc, function (t) {
        for (var j = 0; j < n; j++) {
          if (t >= s.start_s[j] && t <= s.start_s[j] + s.duration_ms[j] / 1e3) {
            var txt = "step " + j + ": " + fmt(s.duration_ms[j]) + " ms";
            if (s.kind[j] !== "observed") { return txt + " (" + PHASE_LABEL[s.kind[j]] + ")"; }
            return txt + " — " + D.phases.order.filter(function (p) { return s.phases_ms[p][j] > 0; })
              .map(function (p) { return PHASE_LABEL[p] + " " + fmt(s.phases_ms[p][j]); }).join(" · ");
          }
        }
        return "between steps";
      });
      fig.setAttribute("data-drawn", "yes");
    },
    histogram: function (fig) {
      var h = D.histogram;
      if (!h.counts.length) { return noData(fig, "no observed steps to plot"); }
      var svg = newSvg(fig), lo = h.edges_ms[0], hi = h.edges_ms[h.edges_ms.length - 1];
      if (hi <= lo) { hi = lo + 1; }
      var cMax = Math.max.apply(null, h.counts);
      var sx = scale(lo, hi, M.l, W - M.r), sy = scale(0, cMax * 1.1, H - M.b, M.t);
      axes(svg, sx, sy, ticks(0, cMax * 1.1, 4), ticks(lo, hi, 8), function (v) { return fmt(v) + " ms"; });
      label(svg, 4, 12, "steps", {});
      h.counts.forEach(function (c, k) {
        if (!c) { return; }
        var x0 = sx(h.edges_ms[k]), x1 = sx(h.edges_ms[k + 1]);
        var r = el("rect", {x: x0 + 0.5, y: sy(c), width: Math.max(x1 - x0 - 1, 0.8), height: sy(0) - sy(c),
                            fill: "#1f77b4", "class": "bar"}, svg);
        el("title", {}, r).textContent = c + " steps of " + fmt(h.edges_ms[k]) + "–" + fmt(h.edges_ms[k + 1]) + " ms";
      });
      fig.setAttribute("data-drawn", "yes");
    },
    cpu: function (fig) {
      var m = D.monitor;
      var cores = m.cpu_cores.map(function (v, k) { return {label: "core " + k, values: v}; });
      var series = colored(cores);
      if (!linePlot(fig, m.t_s, series, "% busy", 100)) { noData(fig, m.note || "no CPU samples"); }
    },
    workers: function (fig) {
      var m = D.monitor;
      var series = [{label: "training process", values: m.trainer_cpu}].concat(m.workers.map(function (w) {
        return {label: "worker " + w.pid + (w.name ? " (" + w.name + ")" : ""), values: w.cpu};
      }));
      if (!linePlot(fig, m.t_s, colored(series), "% of a core")) {
        noData(fig, m.t_s.length ? "no per-process CPU samples" : (m.note || "no process samples"));
      }
    },
    memory: function (fig) {
      var m = D.monitor, mem = m.memory;
      if (!m.t_s.length) { return noData(fig, m.note || "no memory samples"); }
      var series = colored([{label: "used", values: mem.used_gib}, {label: "page cache", values: mem.page_cache_gib},
                            {label: "RSS of the job (trainer + workers)", values: mem.rss_gib}]);
      linePlot(fig, m.t_s, series, "GiB");
    },
    disk: function (fig) {
      var m = D.monitor, series = [];
      m.disks.forEach(function (d) {
        series.push({label: d.device + " read", values: d.read_mb_per_s});
        series.push({label: d.device + " write", values: d.write_mb_per_s});
      });
      if (!linePlot(fig, m.t_s, colored(series), "MB/s")) {
        noData(fig, m.t_s.length ? "no block-device statistics on this host" : (m.note || "no disk samples"));
      }
    },
    disk_util: function (fig) {
      var m = D.monitor;
      var series = m.disks.map(function (d) { return {label: d.device + " %util", values: d.util_pct}; });
      if (!linePlot(fig, m.t_s, colored(series), "% util", 100)) {
        noData(fig, m.t_s.length ? "no block-device statistics on this host" : (m.note || "no disk samples"));
      }
    },
    gpu: function (fig) {
      var m = D.monitor;
      var series = m.gpus.map(function (g) { return {label: "GPU " + g.index + " " + g.name, values: g.util_pct}; });
      if (!linePlot(fig, m.t_s, colored(series), "% util", 100)) {
        noData(fig, "GPU utilization: not available" + (m.note ? " (" + m.note + ")" : " (no GPU samples)"));
      }
    },
    whatif: function (fig) {
      var w = D.whatif, rows = [["observed", w.observed_steps_per_s, "#1f77b4"],
                                ["compute-only (consumer alone)", w.compute_only_steps_per_s, "#2ca02c"],
                                ["loader-only (producer alone)", w.loader_only_steps_per_s, "#d62728"]]
        .filter(function (r) { return r[1] !== null && r[1] > 0; });
      if (rows.length < 2) { return noData(fig, "the what-if phases did not run" + (w.note ? ": " + w.note : "")); }
      var vals = rows.map(function (r) { return r[1]; });
      var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals), log = hi / lo > 20;
      var h = 30 * rows.length + 34, left = 230;
      var svg = el("svg", {viewBox: "0 0 " + W + " " + h, "class": "chart", role: "img"});
      body(fig).appendChild(svg);
      var tf = log ? function (v) { return Math.log10(v); } : function (v) { return v; };
      var d0 = log ? Math.floor(Math.log10(lo)) - 0.3 : 0, d1 = tf(hi) * (log ? 1 : 1.12) + (log ? 0.4 : 0);
      var sx = scale(d0, d1, left, W - 80);
      rows.forEach(function (r, k) {
        var y = 8 + k * 30;
        label(svg, left - 8, y + 15, r[0], {"text-anchor": "end"});
        var x1 = sx(tf(r[1]));
        el("rect", {x: left, y: y, width: Math.max(x1 - left, 1), height: 20, fill: r[2], "class": "bar"}, svg);
        label(svg, x1 + 6, y + 15, fmt(r[1]) + " steps/s", {});
      });
      label(svg, left, h - 6, log ? "log scale" : "", {});
      fig.setAttribute("data-drawn", "yes");
    }
  };

  var errors = [];
  Array.prototype.forEach.call(document.querySelectorAll("figure[data-plot]"), function (fig) {
    try {
      PLOTS[fig.getAttribute("data-plot")](fig);
    } catch (err) {
      errors.push(fig.getAttribute("data-plot") + ": " + err);
      console.error("supplyline report: cannot draw", fig.getAttribute("data-plot"), err);
    }
  });
  var box = document.getElementById("render-errors");
  box.textContent = errors.join("\n");
  document.body.setAttribute("data-rendered", errors.length ? "errors" : "ok");
})();
"""

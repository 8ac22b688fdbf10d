"""The report as one self-contained HTML page: a Jinja2 template, its plots embedded as base64 PNG."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from kernelpick.console import headline
from kernelpick.reports.data import Report, TunedKey
from kernelpick.reports.decisions import SPEEDUP_NOTE, DecisionGroup, decision_groups
from kernelpick.reports.plots import Plot
from kernelpick.store.keys import Toolchain

#: Candidates a page lists per key unless told otherwise (`--top`).
TOP_ON_PAGE = 100

# In Python rather than a file beside it: the package then needs no data files to install.
TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kernelpick report{% if kernels|length == 1 %}: {{ kernels[0] }}{% endif %}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #212529;
         background: #fdfdfd; padding: 0 1em; }
  h1 { border-bottom: 3px solid #2a9d8f; padding-bottom: .2em; }
  h2 { margin-top: 2em; background: #e9f5f3; padding: .3em .5em; border-left: 6px solid #2a9d8f; }
  h3 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
  table { border-collapse: collapse; margin: .6em 0; font-size: .85em; }
  th, td { padding: .25em .6em; border-bottom: 1px solid #e3e3e3; text-align: right; }
  th { background: #f1f3f5; }
  td.name, th.name, td.status { text-align: left; }
  tr.picked td { background: #fff3cd; font-weight: 600; }
  td.status.failed { color: #c0392b; }
  .meta { color: #555; font-size: .9em; }
  .plots img { max-width: 100%; display: block; margin: .8em 0; border: 1px solid #eee; }
  .note { background: #f8f9fa; padding: .4em .8em; border-left: 4px solid #adb5bd; }
</style>
</head>
<body>
<h1>kernelpick report</h1>
<p class="meta">Made {{ made }} from the {{ sources|join(" and the ") }}: {{ keys|length }} tuned
{{ "key" if keys|length == 1 else "keys" }} of {{ kernels|length }}
{{ "kernel" if kernels|length == 1 else "kernels" }}.</p>
<ul>
{% for kernel in kernels %}  <li><a href="#{{ kernel|e }}">{{ kernel }}</a>: {{ by_kernel[kernel]|length }} {{ "key" if by_kernel[kernel]|length == 1 else "keys" }}</li>
{% endfor %}</ul>
{% for kernel in kernels %}
<h2 id="{{ kernel|e }}">{{ kernel }}</h2>
{% for plot in kernel_plots.get(kernel, []) %}<div class="plots"><img alt="{{ plot.title }}" src="data:image/png;base64,{{ plot.data }}"></div>{% endfor %}
{% for group in decisions.get(kernel, []) %}
<h3 class="decisions">Decisions on {{ group.where }}{% if group.shape %}: {{ group.shape }}{% endif %}</h3>
{% set columns = group.columns() %}<table class="decisions"><tr>{% for column in columns %}<th{% if not column.right %} class="name"{% endif %}>{{ column.header }}</th>{% endfor %}</tr>
{% for d in group.decisions %}<tr>{% for cell in group.cells(d) %}<td{% if not columns[loop.index0].right %} class="name"{% endif %}>{% if loop.first %}<a href="#{{ d.tuned.slug }}">{{ cell }}</a>{% else %}{{ cell }}{% endif %}</td>{% endfor %}</tr>
{% endfor %}</table>
{% if group.caption %}<p class="meta">{{ group.caption }}</p>{% endif %}
{% endfor %}{% if decisions.get(kernel) %}<p class="meta">{{ speedup_note }}</p>{% endif %}
{% for k in by_kernel[kernel] %}{% set winner = k.winner %}{% set best_known = k.best_known_ms %}
<h3 id="{{ k.slug }}">{{ k.name }}{{ k.key_text }}</h3>
<p class="meta">{{ "Tuned kernel" if k.kind == "autotune" else "Selector" }} on {{ k.device }}{% if k.capability %} (sm {{ k.capability }}){% endif %}
{%- if k.toolchain %}; {{ toolchain(k.toolchain) }}{% endif %}; from the {{ "tuning log" if k.source == "log" else "result store" }}
{%- if k.tunings > 1 %} ({{ k.tunings }} tunings merged){% endif %}{% if k.seconds is not none %}; tuned in {{ "%.2f"|format(k.seconds) }} s{% endif %}.
{% if winner %}Picked <b>{{ winner.name }}</b>{% if winner.result.ok %} at {{ "%.4g"|format(winner.result.cost_ms) }} ms per call{% endif %}.{% endif %}</p>
{% if k.note %}<p class="note">{{ k.note }}</p>{% endif %}
{% set roof = k.roofline() %}{% if roof %}
<table><tr><th>FLOPs</th><th>bytes</th><th>ms</th><th>TFLOP/s</th><th>% of compute peak</th><th>GB/s</th><th>% of bandwidth peak</th><th>% of roof</th><th class="name">peaks</th></tr>
<tr><td>{{ number(roof.flops) }}</td><td>{{ number(roof.bytes) }}</td><td>{{ "%.4g"|format(roof.ms) }}</td>
<td>{{ number(roof.tflops) }}</td><td>{{ percent(roof.compute_percent) }}</td><td>{{ number(roof.gbps) }}</td>
<td>{{ percent(roof.memory_percent) }}</td><td>{{ percent(roof.roof_percent) }}{% if roof.bound %} ({{ roof.bound }} bound){% endif %}</td>
<td class="name">{{ roof.peaks.model if roof.peaks else "not known for this device" }}</td></tr></table>
{% endif %}
{% if k.searches %}
<table><tr><th class="name">search</th><th>configs timed</th><th>best ms</th><th>of best known</th><th>seconds</th></tr>
{% for s in k.searches %}<tr><td class="name">{{ s.strategy }}</td><td>{{ s.costs|length }}</td><td>{{ number(s.best_ms) }}</td>
<td>{{ ratio(best_known, s.best_ms) }}</td><td>{{ number(s.seconds[-1]) if s.timed else "-" }}</td></tr>
{% endfor %}</table>
{% endif %}
{% set ranked = k.ranked() %}
<table><tr><th>#</th><th class="name">candidate</th><th>ms/call</th><th>% of best</th><th>runs</th><th class="name">timer</th><th class="name">status</th></tr>
{% for c in ranked[:top] %}<tr{% if c.name == k.best %} class="picked"{% endif %}><td>{{ loop.index }}</td><td class="name">{{ c.name }}</td>
{% if c.result.ok %}<td>{{ "%.4f"|format(c.result.cost_ms) }}</td><td>{{ ratio(best_known, c.result.cost_ms) }}</td>
<td>{{ c.result.timing.runs }}</td><td class="name">{{ c.result.timing.timer or "-" }}</td>
{% else %}<td>-</td><td>-</td><td>-</td><td class="name">-</td>{% endif %}
<td class="status{% if not c.result.ok %} failed{% endif %}">{{ c.result.status }}{% if c.result.from_store %} (stored){% endif %}{% if c.name == k.best %}, picked{% endif %}{% if c.result.message %}: {{ brief(c.result.message) }}{% endif %}</td></tr>
{% endfor %}</table>
{% if ranked|length > top %}<p class="meta">{{ ranked|length - top }} more candidates are not shown (<code>kernelpick report --json</code> lists them all).</p>{% endif %}
<div class="plots">{% for plot in key_plots.get(k.slug, []) %}<img alt="{{ plot.title }}" src="data:image/png;base64,{{ plot.data }}">{% endfor %}</div>
{% endfor %}{% endfor %}
</body>
</html>
"""


def render_html(report: Report, plots: list[Plot], top: int = TOP_ON_PAGE) -> str:
    """The page: per kernel its roofline and a selector's decisions (each linking to its key), per key
    its summary, roofline figures, searches, its `top` candidates (0: all) and its plots."""
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    kernels = report.kernels()
    by_kernel: dict[str, list[TunedKey]] = {kernel: report.of(kernel) for kernel in kernels}
    decisions: dict[str, list[DecisionGroup]] = {}
    for group in decision_groups(k for k in report.keys if k.kind == "select"):
        decisions.setdefault(group.kernel, []).append(group)
    kernel_plots: dict[str, list[dict[str, str]]] = {}
    key_plots: dict[str, list[dict[str, str]]] = {}
    for plot in plots:
        embedded = {"title": plot.title, "data": base64.b64encode(plot.png).decode()}
        if plot.key is None:
            kernel_plots.setdefault(plot.kernel, []).append(embedded)
        else:
            key_plots.setdefault(plot.key, []).append(embedded)
    return environment.from_string(TEMPLATE).render(
        made=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        sources=list(report.sources),
        keys=report.keys,
        kernels=kernels,
        by_kernel=by_kernel,
        kernel_plots=kernel_plots,
        key_plots=key_plots,
        decisions=decisions,
        speedup_note=SPEEDUP_NOTE,
        top=top if top > 0 else max((len(k.candidates) for k in report.keys), default=0),
        number=_number,
        percent=_percent,
        ratio=_ratio,
        brief=lambda message: headline(message, 160),
        toolchain=_toolchain,
    )


def write_html(report: Report, plots: list[Plot], path: Path, top: int = TOP_ON_PAGE) -> Path:
    """Write the page to `path` (its folder made if missing) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, plots, top), encoding="utf-8")
    return path


def _toolchain(versions: Mapping[str, Any]) -> str:
    """A tuning's toolchain as recorded ({triton, torch, cuda}), as `Toolchain.describe` names it."""
    return Toolchain(str(versions.get("triton")), str(versions.get("torch")), versions.get("cuda")).describe()


def _number(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _ratio(best: float | None, value: float | None) -> str:
    """`best` as a percentage of `value`: 100% for the best."""
    if best is None or value is None or value <= 0:
        return "-"
    return f"{100 * best / value:.1f}%"

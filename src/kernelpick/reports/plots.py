"""The report's plots as PNG: time by config and by parameter, failures, search progress, roofline."""

from __future__ import annotations

import io
import math
import random
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpick.bench.result import STATUSES
from kernelpick.device import device_peaks
from kernelpick.errors import ReportError
from kernelpick.reports.data import safe_filename

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from kernelpick.reports.data import Report, TunedKey

#: One colour per status, the same in every plot.
STATUS_COLOURS = dict(
    zip(STATUSES, ("#2a9d8f", "#e9c46a", "#9b5de5", "#e76f51", "#8d5524", "#6c757d", "#212529", "#adb5bd"))
)
#: Colours of search strategies' curves, in order of first appearance.
STRATEGY_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
#: Candidates named along the x axis of the time-by-config plot at most, and the longest name
#: that fits there; otherwise they are numbered.
NAMED_CONFIGS = 40
NAME_LENGTH = 40
#: Parameters plotted at most (those that vary, in order of appearance).
PARAMETERS = 8


@dataclass(frozen=True, slots=True)
class Plot:
    """One drawn plot: `name` says what it shows ("configs", "parameters", "failures", "progress",
    "roofline"); `key` is the slug of the tuned key it shows, None for a plot of the whole kernel;
    `device` names the device of a whole-kernel plot where the kernel was tuned on several."""

    name: str
    kernel: str
    key: str | None
    title: str
    png: bytes
    device: str | None = None

    @property
    def filename(self) -> str:
        on = f"-{safe_filename(self.device)}" if self.device else ""
        return f"{self.key or safe_filename(self.kernel)}{on}-{self.name}.png"


def require_matplotlib() -> None:
    """Raises:
    ReportError: matplotlib is not installed (it says how to install it).
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ReportError(
            "plots need matplotlib, which is not installed: pip install 'kernelpick[plot]'"
        ) from None


def plots_of(report: Report) -> list[Plot]:
    """Every plot of `report`: each kernel's roofline (where FLOPs or bytes are known), then each key's.

    Raises:
        ReportError: matplotlib is not installed.
    """
    require_matplotlib()
    drawn: list[Plot] = []
    for kernel in report.kernels():
        keys = report.of(kernel)
        devices = list(dict.fromkeys(tuned.device for tuned in keys))  # a roofline per device
        for device in devices:
            figure = roofline_figure([tuned for tuned in keys if tuned.device == device])
            if figure is not None:
                on = device if len(devices) > 1 else None
                title = f"{kernel}{f' on {on}' if on else ''}: roofline"
                drawn.append(Plot("roofline", kernel, None, title, _png(figure), on))
    for tuned in report.keys:
        for name, draw in (
            ("configs", config_figure),
            ("parameters", parameter_figure),
            ("failures", failure_figure),
            ("progress", progress_figure),
        ):
            figure = draw(tuned)
            if figure is not None:
                title = f"{tuned.name}{tuned.key_text}: {name}"
                drawn.append(Plot(name, tuned.name, tuned.slug, title, _png(figure)))
    return drawn


def write_pngs(plots: Sequence[Plot], folder: Path) -> list[Path]:
    """Write each plot to `folder` (made if missing) as `<kernel>-<key hash>-<plot>.png`; the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for plot in plots:
        path = folder / plot.filename
        path.write_bytes(plot.png)
        written.append(path)
    return written


def _title(figure: Figure, text: str) -> str:
    """`text` broken into lines that fit the figure's width at the titles' 10-point size (a long
    key would otherwise run off the page)."""
    characters = int(figure.get_figwidth() * 11)  # 10-point text over the axes: about 11 characters an inch
    return textwrap.fill(text, width=max(20, characters), break_long_words=False)


def _figure(width: float = 8.0, height: float = 4.0) -> Figure:
    # A bare Figure on an Agg canvas (`_png`), never pyplot: no window opens, and no global pyplot
    # state is left behind in the user's process.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _cost_axis(axes: Axes, costs: Sequence[float]) -> None:
    axes.set_ylabel("ms per call")
    finite = [c for c in costs if math.isfinite(c) and c > 0]
    if finite and max(finite) / min(finite) > 20:
        axes.set_yscale("log")
    axes.grid(True, alpha=0.3)


def config_figure(tuned: TunedKey) -> Figure | None:
    """Each candidate's time in the order they are listed, failures marked above, the winner starred."""
    candidates = list(tuned.candidates)
    working = [(i, c) for i, c in enumerate(candidates) if c.result.ok]
    if not working:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    costs = [c.result.cost_ms for _, c in working]
    axes.scatter([i for i, _ in working], costs, s=18, color=STATUS_COLOURS["ok"], label="ok", zorder=2)
    ceiling = max(costs) * 1.25
    for status in STATUSES[1:]:
        failed = [i for i, c in enumerate(candidates) if c.result.status == status]
        if failed:
            axes.scatter(
                failed, [ceiling] * len(failed), marker="x", s=30, color=STATUS_COLOURS[status], label=status
            )
    winner = tuned.winner
    if winner is not None and winner.result.ok:
        index = candidates.index(winner)
        axes.scatter(
            [index],
            [winner.result.cost_ms],
            marker="*",
            s=220,
            color="#f4a261",
            edgecolor="black",
            label=f"picked: {_shorten(winner.name, 70)}",
            zorder=3,
        )
    if len(candidates) <= NAMED_CONFIGS and max(len(c.name) for c in candidates) <= NAME_LENGTH:
        axes.set_xticks(
            range(len(candidates)), [c.name for c in candidates], rotation=60, ha="right", fontsize=7
        )
    else:
        axes.set_xlabel(f"candidate, in the order tuned (0 to {len(candidates) - 1})")
    _cost_axis(axes, costs)
    axes.set_title(_title(figure, f"{tuned.name}{tuned.key_text}: time by config"), fontsize=10)
    axes.legend(fontsize=7, loc="best")
    return figure


def parameter_figure(tuned: TunedKey) -> Figure | None:
    """For each parameter that varies, the time of the working candidates by its value (box and points);
    candidates without the parameter (a library choice beside templates) are left out of its plot."""
    working = [c for c in tuned.candidates if c.result.ok]
    by_name: dict[str, dict[Any, list[float]]] = {}
    for candidate in working:
        for name, value in candidate.params.items():
            by_name.setdefault(name, {}).setdefault(value, []).append(candidate.result.cost_ms)
    varying = [name for name, by_value in by_name.items() if len(by_value) > 1][:PARAMETERS]
    if not varying:
        return None
    columns = min(len(varying), 4)
    rows = math.ceil(len(varying) / columns)
    figure = _figure(2.6 * columns + 1, 2.8 * rows + 0.4)
    jitter = random.Random(0)
    for place, name in enumerate(varying, 1):
        axes = figure.add_subplot(rows, columns, place)
        values = sorted(by_name[name], key=_value_order)
        groups = [by_name[name][value] for value in values]
        axes.boxplot(groups, positions=range(len(values)), widths=0.5, showfliers=False)
        for position, group in enumerate(groups):
            spread = [position + jitter.uniform(-0.18, 0.18) for _ in group]
            axes.scatter(spread, group, s=9, alpha=0.6, color=STATUS_COLOURS["ok"], zorder=2)
        axes.set_xticks(range(len(values)), [str(v) for v in values], fontsize=7)
        axes.set_xlabel(name, fontsize=9)
        _cost_axis(axes, [c for group in groups for c in group])
    figure.suptitle(_title(figure, f"{tuned.name}{tuned.key_text}: time by parameter value"), fontsize=10)
    return figure


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value_order(value: Any) -> tuple[int, Any]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0, value
    return 1, str(value)


def failure_figure(tuned: TunedKey) -> Figure | None:
    """How many candidates ended in each status (None when none failed)."""
    counts = {s: sum(c.result.status == s for c in tuned.candidates) for s in STATUSES}
    if counts["ok"] == len(tuned.candidates):
        return None
    shown = [s for s in STATUSES if counts[s]]
    figure = _figure(7, 0.5 * len(shown) + 1.4)
    axes = figure.add_subplot()
    bars = axes.barh(shown, [counts[s] for s in shown], color=[STATUS_COLOURS[s] for s in shown])
    axes.bar_label(bars, padding=3, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("candidates")
    axes.set_title(_title(figure, f"{tuned.name}{tuned.key_text}: candidates by status"), fontsize=10)
    return figure


def progress_figure(tuned: TunedKey) -> Figure | None:
    """Each search's best-so-far against time (or evaluations, where a trace has no times): one
    colour per strategy, repeated runs of one strategy in its colour.

    The time axis is logarithmic when one search ran over ten times as long as another, so that
    short searches are not squeezed against the axis by an exhaustive one; the cost axis shows from
    the best known cost to twice it, where strategies differ.
    """
    traces = [t for t in tuned.searches if t.costs]
    if not traces:
        return None
    timed = all(t.timed for t in traces)
    figure = _figure()
    axes = figure.add_subplot()
    strategies = list(dict.fromkeys(t.strategy for t in traces))
    labelled: set[str] = set()
    all_costs: list[float] = []
    starts: list[float] = []
    ends: list[float] = []
    for trace in traces:
        best = trace.best_so_far()
        xs = [float(s or 0.0) for s in trace.seconds] if timed else [float(i + 1) for i in range(len(best))]
        points = [(x, y) for x, y in zip(xs, best) if math.isfinite(y)]
        if not points:
            continue
        runs = sum(t.strategy == trace.strategy for t in traces)
        label = (
            None if trace.strategy in labelled else trace.strategy + (f" ({runs} runs)" if runs > 1 else "")
        )
        labelled.add(trace.strategy)
        colour = STRATEGY_COLOURS[strategies.index(trace.strategy) % len(STRATEGY_COLOURS)]
        xs, ys = [x for x, _ in points], [y for _, y in points]
        axes.step(xs, ys, where="post", color=colour, label=label, alpha=0.85)
        all_costs += ys
        starts.append(xs[0])
        ends.append(xs[-1])
    best_known = tuned.best_known_ms
    if best_known is not None:
        axes.axhline(
            best_known, color="black", linestyle="--", linewidth=1, label=f"best known {best_known:.4g} ms"
        )
    axes.set_xlabel("seconds since the tuning began" if timed else "configs timed")
    _cost_axis(axes, all_costs)
    if ends and min(starts) > 0 and max(ends) > 10 * min(ends):
        axes.set_xscale("log")
    if best_known is not None and all_costs and max(all_costs) > 2 * best_known:
        axes.set_yscale("linear")
        axes.set_ylim(best_known * 0.98, best_known * 2)
    axes.set_ylabel("best ms per call so far")
    axes.set_title(_title(figure, f"{tuned.name}{tuned.key_text}: search progress"), fontsize=10)
    axes.legend(fontsize=8)
    return figure


def roofline_figure(keys: Sequence[TunedKey]) -> Figure | None:
    """Each key's candidates at their arithmetic intensity and achieved TFLOP/s, the winners marked,
    under the roofs of the device's peaks (keys with both FLOPs and bytes known only; all on one
    device, whose roofs are drawn)."""
    placed: list[tuple[TunedKey, float, float, float | None]] = []  # key, intensity, TFLOP/s, peak
    for tuned in keys:
        found = tuned.roofline()
        if found is not None and found.intensity is not None and found.tflops is not None:
            placed.append((tuned, found.intensity, found.tflops, found.peak_tflops))
    if not placed:
        return None
    figure = _figure(7, 4.5)
    axes = figure.add_subplot()
    for tuned, intensity, tflops, _ in placed:
        others = [tuned.roofline(c) for c in tuned.candidates if c.result.ok]
        achieved = [o.tflops for o in others if o is not None and o.tflops is not None]
        axes.scatter([intensity] * len(achieved), achieved, s=8, alpha=0.3, color="#6c757d")
        axes.scatter([intensity], [tflops], marker="*", s=120, zorder=3, label=_shorten(tuned.key_text, 50))
    first, _, _, peak = placed[0]
    peaks = device_peaks(first.device)
    if peaks is not None and peak is not None:
        intensities = [intensity for _, intensity, _, _ in placed]
        low, high = min(intensities) / 4, max(intensities) * 4
        ridge = peak * 1e3 / peaks.memory_gbps
        xs = [low, min(max(ridge, low), high), high]
        axes.plot(
            xs,
            [min(peak, x * peaks.memory_gbps / 1e3) for x in xs],
            color="black",
            linewidth=1.5,
            label=f"{peaks.model}: {peak:g} TFLOP/s, {peaks.memory_gbps:g} GB/s",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (FLOP per byte)")
    axes.set_ylabel("TFLOP/s achieved")
    axes.grid(True, which="both", alpha=0.3)
    axes.set_title(_title(figure, f"{first.name} on {first.device}: roofline"), fontsize=10)
    axes.legend(fontsize=7)
    return figure

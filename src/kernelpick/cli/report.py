"""The `kernelpick report [KERNEL] [--log PATH] [--store PATH] [--html OUT] [--png DIR] [--json]` command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from kernelpick import settings
from kernelpick.console import console
from kernelpick.device import DeviceInfo
from kernelpick.engine.record import autotune_table
from kernelpick.errors import ReportError
from kernelpick.reports.data import Report, TunedKey, load_report
from kernelpick.reports.decisions import decision_groups, print_decisions
from kernelpick.reports.page import TOP_ON_PAGE, write_html
from kernelpick.reports.plots import Plot, plots_of, write_pngs
from kernelpick.store.default import default_store_path

#: Candidates the terminal shows per key unless told otherwise (`--top`).
TOP_IN_TERMINAL = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kernel", nargs="?", help="only this kernel's or selector's keys (default: every one)"
    )
    parser.add_argument(
        "--log", metavar="PATH", help="read this tuning log (default: KERNELPICK_LOG, when the file exists)"
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="read this result store (default: results.sqlite3 under KERNELPICK_CACHE_DIR, when it exists); "
        "with --log or --store, only what they name is read",
    )
    parser.add_argument(
        "--html", metavar="OUT.html", help="write a self-contained page with the tables and plots"
    )
    parser.add_argument("--png", metavar="DIR", help="write the plots to this folder as PNG files")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument(
        "--top",
        type=int,
        metavar="N",
        help=f"candidates per key in the tables (default: {TOP_IN_TERMINAL} in the terminal, {TOP_ON_PAGE} "
        "on the page; 0: all; --json lists all)",
    )


def report_sources(log: str | None, store: str | None) -> tuple[Path | None, Path | None]:
    """The log and store to read: those given, else `KERNELPICK_LOG` and the default store where they exist.

    Raises:
        ReportError: nothing given and neither default exists.
    """
    if log or store:
        return (Path(log) if log else None), (Path(store) if store else None)
    logged = settings.current().log_path
    stored = default_store_path()
    found = (
        (logged if logged is not None and logged.is_file() else None),
        (stored if stored.is_file() else None),
    )
    if found == (None, None):
        where = "KERNELPICK_LOG is not set" if logged is None else f"there is no tuning log at {logged}"
        raise ReportError(
            f"nothing to report: {where} and there is no result store at {stored}; tune with "
            "KERNELPICK_LOG=tunings.jsonl set, or pass --log PATH or --store PATH"
        )
    return found


def run_report(args: argparse.Namespace) -> int:
    """Print each tuned key's table (or the JSON), and write the page and plots asked for."""
    log, store = report_sources(args.log, args.store)
    report = load_report(log, store, args.kernel)
    plots: list[Plot] = plots_of(report) if args.html or args.png else []
    written = write_pngs(plots, Path(args.png)) if args.png else []
    if args.html:
        top = TOP_ON_PAGE if args.top is None else args.top
        written.append(write_html(report, plots, Path(args.html), top=top))
    if args.json:
        decisions = [
            group.to_dict() for group in decision_groups(k for k in report.keys if k.kind == "select")
        ]
        data = {**report.to_dict(), "decisions": decisions, "written": [str(p) for p in written]}
        print(json.dumps(data, indent=2, allow_nan=False))
        return 0
    out = console()
    print_report(out, report, TOP_IN_TERMINAL if args.top is None else args.top)
    for path in written:
        out.print(escape(f"wrote {path}"))
    return 0


def print_report(out: Console, report: Report, top: int) -> None:
    """Each key's AUTOTUNE table (its `top` candidates; 0: all), roofline figures and searches; then
    each selector's decisions (`kernelpick.reports.decisions`)."""
    if not report.keys:
        raise ReportError(f"the {' and the '.join(report.sources)} hold no tunings yet")
    for tuned in report.keys:
        ranked = tuned.ranked()
        shown = ranked if top <= 0 else ranked[:top]
        origin = "tuning log" if tuned.source == "log" else "result store"
        note = f"from the {origin}" + (f" ({tuned.tunings} tunings merged)" if tuned.tunings > 1 else "")
        if len(shown) < len(ranked):
            note += f"; {len(ranked) - len(shown)} more candidates not shown (--top 0 shows all)"
        if tuned.note:
            note = f"{tuned.note}; {note}"
        rows = [(c.name, c.result) for c in shown]
        out.print(
            autotune_table(
                f"{tuned.name}{tuned.key_text}",
                rows,
                DeviceInfo.recorded(tuned.device, tuned.capability),
                tuned.seconds,
                best=tuned.best,
                note=note,
            )
        )
        for line in summary_lines(tuned):
            out.print(escape(line))
        out.print()
    print_decisions(out, decision_groups(k for k in report.keys if k.kind == "select"))


def summary_lines(tuned: TunedKey) -> list[str]:
    """The roofline figures of the pick and one line per search, for the terminal."""
    lines = []
    found = tuned.roofline()
    if found is not None:
        parts = []
        if found.tflops is not None:
            parts.append(f"{found.tflops:.4g} TFLOP/s" + _share(found.compute_percent, found.peak_tflops))
        if found.gbps is not None:
            parts.append(
                f"{found.gbps:.4g} GB/s"
                + _share(found.memory_percent, None if found.peaks is None else found.peaks.memory_gbps)
            )
        if found.roof_percent is not None:
            parts.append(f"{found.roof_percent:.1f}% of the roof ({found.bound} bound)")
        peaks = found.peaks.model if found.peaks else "no peaks known for this device"
        lines.append(f"roofline of the pick: {', '.join(parts)}; {peaks}")
    best_known = tuned.best_known_ms
    for search in tuned.searches:
        best = search.best_ms
        share = (
            ""
            if best is None or best_known is None
            else f" ({100 * best_known / best:.1f}% of the best known)"
        )
        after = f" in {search.seconds[-1]:.2f} s" if search.timed else ""
        found_text = "nothing that worked" if best is None else f"{best:.4g} ms{share}"
        lines.append(f"search {search.strategy}: {len(search.costs)} configs timed{after}, best {found_text}")
    return lines


def _share(percent: float | None, peak: float | None) -> str:
    return "" if percent is None or peak is None else f" ({percent:.1f}% of {peak:g})"

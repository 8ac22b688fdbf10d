"""The `kernelpick tune SPEC.py [--ray ADDRESS] [--devices 0,1] [--export table.json] [--fresh]` command."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from kernelpick.console import TuningProgress, console, headline
from kernelpick.errors import StoreError
from kernelpick.jobs.cluster import TuneRun, tune_spec
from kernelpick.jobs.spec import JobOutcome
from kernelpick.store import SQLiteStore
from kernelpick.store.default import default_store
from kernelpick.store.table import DeploymentTable, export_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        metavar="SPEC.py",
        help="a Python file whose JOBS lists kernelpick.jobs.Job, or a recording of a run (KERNELPICK_RECORD)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run on a Ray cluster, one actor per GPU: 'auto', 'ray://host:10001', or 'local' to start one here",
    )
    parser.add_argument(
        "--devices", help="without Ray: local GPUs to tune on in parallel, one process each, e.g. 0,1,2,3"
    )
    parser.add_argument(
        "--export", metavar="TABLE.json", help="write the deployment table of the keys the spec's jobs tuned"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="run every job, even those a run before finished"
    )


def run_tune(args: argparse.Namespace) -> int:
    """Run the spec's jobs with a progress bar, print a summary and export the table; 1 if a job failed."""
    out = console(stderr=True)
    spec_name = Path(args.spec).name
    bars: list[TuningProgress] = []

    def starting(count: int, skipped: list[str]) -> None:
        if skipped:
            out.print(f"{len(skipped)} jobs finished in an earlier run are skipped (--fresh runs them again)")
        bars.append(TuningProgress(f"tune {spec_name}", count).__enter__())

    def finished(outcome: JobOutcome) -> None:
        state = f"{outcome.seconds:.1f} s" if outcome.ok else f"FAILED: {headline(outcome.error, 200)}"
        bar = bars[0]
        bar.advance(description=f"{spec_name}: {outcome.job}")
        if not bar.enabled:  # no bar on a pipe: a line per job, for logs
            out.print(escape(f"[{bar.done}/{bar.total}] {outcome.job}: {state}"))
        elif not outcome.ok:
            out.print(escape(f"{outcome.job}: {state}"))

    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else []
    try:
        run = tune_spec(
            args.spec,
            ray_address=args.ray,
            devices=devices,
            resume=not args.fresh,
            progress=finished,
            on_start=starting,
        )
    finally:
        for bar in bars:
            bar.__exit__(None, None, None)
    ok = len(run.outcomes) - len(run.failed)
    out.print(
        escape(
            f"{ok} of {len(run.outcomes)} jobs tuned on {run.device} in {run.seconds:.1f} s"
            + (f"; {len(run.skipped)} skipped as done" if run.skipped else "")
        )
    )
    for outcome in run.failed:
        out.print(escape(f"  failed: {outcome.job}: {headline(outcome.error, 300)}"))
    if args.export:
        table = export(run, Path(args.export))
        out.print(escape(f"wrote {len(table.entries)} picks for {table.device} to {args.export}"))
    return 1 if run.failed else 0


def export(run: TuneRun, path: Path) -> DeploymentTable:
    """The table of the keys the spec's jobs tuned on the run's device model (not the other keys of
    their kernels, nor other kernels the store holds), written to `path`."""
    store = default_store()
    local = getattr(store, "local", store)  # a layered store's local part holds what it read remotely too
    if not isinstance(local, SQLiteStore):
        raise StoreError(f"cannot export {path}: the result store is in memory (KERNELPICK_CACHE=0)")
    rows = [row for row in local.rows() if run.tuned(row)]
    table = export_table(rows, device=run.device)
    table.write(path)
    return table

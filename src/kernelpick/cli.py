"""The `kernelpick` command: `demo`, `analyze`, `tune`, `report`, `cache` (and its old name `store`) and `settings`."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence

from rich.table import Table

from kernelpick import settings
from kernelpick.errors import KernelpickError
from kernelpick.report import console
from kernelpick.store.command import add_cache_commands, store_command


def _demo(args: argparse.Namespace) -> int:
    from kernelpick.demo import run_demo
    from kernelpick.report import record_table

    with settings.override(**({"cache_dir": args.cache_dir} if args.cache_dir else {})):
        demo = run_demo()
    if args.json:
        print(json.dumps(demo.summary(verbose=args.verbose), indent=2))
        return 0
    out = console()
    for name, record in demo.records.items():
        out.print(record_table(name, record))
        out.print()
    where = "read from the result store" if demo.cache_hit else "measured now and stored"
    out.print(f"Tuned 2 kernels on {demo.device.label} in {demo.seconds:.2f} s; results {where}.")
    if not demo.cache_hit:
        out.print("Run it again: the second run reads every result from the store and benchmarks nothing.")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from kernelpick.analysis import run_analyze

    print(run_analyze(args.kernel, args.arg, args.json))
    return 0


def _tune(args: argparse.Namespace) -> int:
    from kernelpick.tune.command import run_tune

    return run_tune(args)


def _report(args: argparse.Namespace) -> int:
    from kernelpick.reports.command import run_report

    return run_report(args)


def _settings(args: argparse.Namespace) -> int:
    table = Table(title="kernelpick settings (environment variables)", title_justify="left", box=None)
    for column in ("variable", "default", "now", "meaning"):
        table.add_column(column)
    current = settings.current()
    for (env, default, doc), field_name in zip(settings.describe(), settings.Settings.__dataclass_fields__):
        table.add_row(env, default, repr(getattr(current, field_name)), doc)
    console().print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelpick", description="Pick the fastest GPU kernel for each call, safely."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="tune a built-in matmul and vector add here and print the results"
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    demo.add_argument("--verbose", action="store_true", help="with --json: include every config's result")
    demo.add_argument("--cache-dir", help="use this result store folder (default: KERNELPICK_CACHE_DIR)")
    demo.set_defaults(handler=_demo)

    analyze = commands.add_parser(
        "analyze", help="say which arguments a Triton kernel reads and writes (from its TTIR, no GPU needed)"
    )
    analyze.add_argument("kernel", metavar="FILE.py:KERNEL", help="the kernel, by file (or module) and name")
    analyze.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="an argument: a tensor (f32[1024], bf16[64,64]), a scalar type (i32, fp32) or a value (64)",
    )
    analyze.add_argument("--json", action="store_true", help="print one JSON object")
    analyze.set_defaults(handler=_analyze)

    tune = commands.add_parser(
        "tune",
        help="run a spec's tuning jobs here, on local GPUs or over a Ray cluster, and export the table",
    )
    from kernelpick.tune.command import add_arguments

    add_arguments(tune)
    tune.set_defaults(handler=_tune)

    report = commands.add_parser(
        "report",
        help="per tuned key, its candidates, plots, search progress and roofline, from the tuning log and the store",
    )
    from kernelpick.reports.command import add_arguments as add_report_arguments

    add_report_arguments(report)
    report.set_defaults(handler=_report)

    add_cache_commands(commands)
    store = commands.add_parser("store", help="old name of `cache stats` (and of `cache prune` with --clear)")
    store.add_argument("--clear", action="store_true", help="forget stored results (`cache prune --all`)")
    store.add_argument("--kernel", help="with --clear: only this kernel's results (`cache prune --kernel`)")
    store.set_defaults(handler=store_command)

    env = commands.add_parser(
        "settings", help="list every KERNELPICK_* variable, its default and its value now"
    )
    env.set_defaults(handler=_settings)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Triton 3.9 warns about a default it will change; it is noise for this command's readers.
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
    try:
        return int(args.handler(args))
    except KernelpickError as error:
        print(f"kernelpick: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The `kernelpick` command line: demo, analyze, tune, report, cache, code, device and settings."""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from kernelpick import settings
from kernelpick.cli.cache import add_cache_commands, store_command
from kernelpick.console import console
from kernelpick.errors import KernelpickError
from kernelpick.store.keys import Toolchain
from kernelpick.store.redis import without_password
from kernelpick.version import __version__


def _demo(args: argparse.Namespace) -> int:
    from kernelpick.demo import run_demo
    from kernelpick.store.default import default_store_path

    with settings.override(**({"cache_dir": args.cache_dir} if args.cache_dir else {})):
        demo = run_demo()
        store = default_store_path() if settings.current().cache else None
    if args.json:
        print(json.dumps(demo.summary(verbose=args.verbose), indent=2))
        return 0
    out = console()
    for record in demo.records.values():
        out.print(record.table())
        out.print()
    for line in [*demo.failures(args.verbose), *(demo.steps() if args.verbose else [])]:
        out.print(escape(line))
    where = "read from the result store" if demo.cache_hit else "measured now and stored"
    kept = f" in {store}" if store is not None else " (in memory: KERNELPICK_CACHE=0)"
    out.print(
        escape(f"Tuned 2 kernels on {demo.device.label} in {demo.seconds:.2f} s; results {where}{kept}.")
    )
    if not demo.cache_hit:
        out.print("Run it again: the second run reads every result from the store and benchmarks nothing.")
    if store is not None:
        shown = next(iter(demo.records))
        again = f" --store {store}" if args.cache_dir else ""
        out.print(
            escape(
                f"What the store holds: kernelpick cache list{again}; kernelpick cache show {shown}{again}"
            )
        )
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from kernelpick.cli.analyze import run_analyze

    print(run_analyze(args.kernel, args.arg, args.json))
    return 0


def _settings(args: argparse.Namespace) -> int:
    """Every setting with its value now; a bad value is shown with its error (this is where a user
    finds out which is bad), and then the status is 2."""
    table = Table(title="kernelpick settings (environment variables)", title_justify="left", box=None)
    for column in ("variable", "default", "now", "meaning"):
        table.add_column(column)
    bad = []
    for (env, default, doc), (field_name, value, error) in zip(settings.describe(), settings.read_each()):
        if field_name == "redis_url":  # shown, so without its password
            value = without_password(value)
        now = repr(value) if error is None else f"[bold red]bad: {escape(str(error))}[/]"
        if error is not None:
            bad.append(env)
        # Text, not markup: rich would take the "[redis]" of "kernelpick[redis]" for a style.
        table.add_row(env, escape(default), now if error is not None else escape(now), escape(doc))
    console().print(table)
    if bad:
        print(f"kernelpick: error: bad value of {', '.join(bad)} (marked in the table)", file=sys.stderr)
        return 2
    return 0


def _add_command(commands: Any, name: str, help: str, module: str, run: str) -> None:
    """A command whose arguments (`add_arguments(parser)`) and handler (`run`) live in `module`."""
    loaded = importlib.import_module(module)
    parser = commands.add_parser(name, help=help)
    loaded.add_arguments(parser)
    parser.set_defaults(handler=getattr(loaded, run))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelpick", description="Pick the fastest GPU kernel for each call, safely."
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"kernelpick {__version__} ({Toolchain.current().describe()})",
        help="print kernelpick's version and the Triton, torch and CUDA versions it runs with",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, show its traceback instead of one line (put it before the command)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="tune a built-in matmul and vector add here and print the results"
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    demo.add_argument(
        "--verbose",
        action="store_true",
        help="the whole reason of each failure and where each tuning's time went (with --json: every "
        "config's result)",
    )
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

    _add_command(
        commands,
        "tune",
        "run a spec's tuning jobs here, on local GPUs or over a Ray cluster, and export the table",
        "kernelpick.cli.tune",
        "run_tune",
    )
    _add_command(
        commands,
        "report",
        "per tuned key, its candidates, plots, search progress and roofline, from the tuning log and the store",
        "kernelpick.cli.report",
        "run_report",
    )

    add_cache_commands(commands)
    store = commands.add_parser("store", help="old name of `cache stats` (and of `cache prune` with --clear)")
    store.add_argument("--clear", action="store_true", help="forget stored results (`cache prune --all`)")
    store.add_argument("--kernel", help="with --clear: only this kernel's results (`cache prune --kernel`)")
    store.set_defaults(handler=store_command)

    _add_command(
        commands,
        "code",
        "print the source of a stored choice: a rendered template, a Triton kernel and its config",
        "kernelpick.cli.code",
        "run_code",
    )
    _add_command(
        commands,
        "device",
        "the facts of each visible GPU (or the CPU interpreter): SMs, memory, peaks, eligibility",
        "kernelpick.cli.device",
        "run_device",
    )

    env = commands.add_parser(
        "settings", help="list every KERNELPICK_* variable, its default and its value now"
    )
    env.set_defaults(handler=_settings)
    return parser


def until_the_reader_leaves(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """`handler`, ending quietly when what reads its output stops reading (`kernelpick cache list --json
    | head` ended with "kernelpick: error: [Errno 32] Broken pipe"): status 1, the output cut short,
    as rich ends a table cut short."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            status = int(handler(args))
            sys.stdout.flush()  # here, where the reader's leaving can be caught, not at exit
            return status
        except BrokenPipeError:
            # Whatever is still buffered goes nowhere: flushed at exit, it would raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a kernelpick error or an OSError (a folder or file that cannot be read or
    written) is one line on stderr and status 2, its traceback with `--debug`."""
    args = build_parser().parse_args(argv)
    # Triton 3.9 warns about a default it will change; it is noise for this command's readers.
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
    try:
        return until_the_reader_leaves(args.handler)(args)
    except (KernelpickError, OSError) as error:
        if args.debug:
            raise
        print(f"kernelpick: error: {error}", file=sys.stderr)
        return 2

"""The `kernelpick cache` commands (and the old `store`): they format what `store.maintenance` computes."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Collection, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from kernelpick.console import Column, FittingTable, console
from kernelpick.device import DeviceInfo
from kernelpick.errors import StoreError, TableError
from kernelpick.store.default import default_store_path
from kernelpick.store.origins import cache_key_of, superseded_sources
from kernelpick.store.text import candidate_name, key_text

if TYPE_CHECKING:
    from kernelpick.store.base import StoredRow
    from kernelpick.store.keys import Toolchain, TuningKey
    from kernelpick.store.maintenance import CheckedRow, KernelTotals
    from kernelpick.store.sqlite import SQLiteStore


#: The help of a command's `--store PATH` option (`store_path` reads it).
STORE_HELP = "the SQLite result store (default: results.sqlite3 under KERNELPICK_CACHE_DIR)"


def store_path(args: argparse.Namespace) -> Path:
    """The result store a command's `--store` names, else the default one (it may not exist)."""
    return Path(args.store) if args.store else default_store_path()


def existing_store(path: Path) -> Path:
    """`path`, where a command reads a result store.

    Raises:
        StoreError: there is no file at `path` (nothing, or a folder); the message says how to name
            the right one.
    """
    if path.is_dir():
        inside = path / "results.sqlite3"
        raise StoreError(
            f"{path} is a folder, not a result store: "
            + (f"pass --store {inside}" if inside.is_file() else "pass --store with the store's file")
            + " (results.sqlite3 in the cache folder)"
        )
    if not path.is_file():
        raise StoreError(
            f"no result store at {path}: nothing was tuned with it yet; pass --store PATH or set "
            "KERNELPICK_CACHE_DIR to the folder that holds results.sqlite3"
        )
    return path


def _open_store(args: argparse.Namespace, *, create: bool = False) -> SQLiteStore:
    from kernelpick.store.sqlite import SQLiteStore

    path = store_path(args)
    return SQLiteStore(path if create else existing_store(path))


def _stored_rows(args: argparse.Namespace) -> tuple[list[StoredRow], str, list[CheckedRow]]:
    """The sound rows of the store --redis or --store names, where that store is, and the corrupt rows
    left out (a line on stderr says how many)."""
    from kernelpick.store.maintenance import readable_rows

    if args.redis:
        from kernelpick.store.redis import RedisStore

        remote = RedisStore(args.redis)  # it leaves out malformed entries itself, warning of each
        try:
            return list(remote.rows()), f"Redis at {remote.url}", []
        finally:
            remote.close()
    rows, corrupt = readable_rows(_open_store(args))
    picks = sum(c.table == "picks" for c in corrupt)
    if corrupt:
        print(
            f"kernelpick: {_count(len(corrupt) - picks, 'corrupt row')}"
            + (f" and {_count(picks, 'pick')} naming no stored result" if picks else "")
            + f" of {store_path(args)} left out; `kernelpick cache verify` names them",
            file=sys.stderr,
        )
    return rows, str(store_path(args)), corrupt


def _when(unix_time: float | None) -> str:
    if unix_time is None:
        return "-"
    return datetime.datetime.fromtimestamp(unix_time, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _bytes(size: int) -> str:
    return (
        f"{size} bytes"
        if size < 1024
        else f"{size / 1024:.1f} kB"
        if size < 2**20
        else f"{size / 2**20:.1f} MB"
    )


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" if number == 1 else f"{number} {thing}s"


def _key_data(key: TuningKey) -> dict[str, Any]:
    return {"key": key.digest, **key.to_dict()}


def _of_kernel(kernel: str, rows: Sequence[StoredRow]) -> list[StoredRow]:
    """The rows of `kernel`.

    Raises:
        StoreError: there are none; the message lists the kernels there are.
    """
    from kernelpick.store.maintenance import unknown_kernel

    mine = [r for r in rows if r.key.kernel == kernel]
    if not mine:
        raise unknown_kernel(kernel, (r.key.kernel for r in rows))
    return mine


def _table(*columns: str, right: Sequence[str] = (), header: bool = True) -> Table:
    """A table without borders; the columns named in `right` are aligned right."""
    table = Table(box=None, show_header=header)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


def _add_row(table: Table, *cells: object) -> None:
    table.add_row(*(escape(str(cell)) for cell in cells))  # stored text is data, never rich markup


def _kernel_table(totals: Sequence[KernelTotals]) -> Table:
    counts = ("keys", "results", "failed", "corrupt")
    table = _table("kernel", *counts, right=counts)
    for t in totals:
        _add_row(table, t.kernel, t.keys, t.results, t.failed, t.corrupt)
    return table


def _cache_list(args: argparse.Namespace) -> int:
    from kernelpick.store.maintenance import summarize_keys

    rows, where, _ = _stored_rows(args)
    summaries = summarize_keys(_of_kernel(args.kernel, rows) if args.kernel else rows)
    # Kernel sources noted beside a store file tell a kernel's old sources apart (none for Redis).
    superseded = (
        frozenset()
        if args.redis
        else superseded_sources(((r.key, r.created) for r in rows), store_path(args).parent)
    )
    if args.json:
        listed = [
            {
                **_key_data(s.key),
                "superseded": (s.key.kernel, s.key.source) in superseded,
                "results": s.results,
                "failed": s.failed,
                "picked": None
                if s.picked is None
                else {
                    "candidate": s.picked.candidate,
                    "description": dict(s.picked.description),
                    "ms_per_call": s.picked.result.cost_ms if s.picked.result.ok else None,
                },
            }
            for s in summaries
        ]
        print(json.dumps(listed, indent=2))
        return 0
    if not summaries:
        print(f"no results stored in {where}")
        return 0
    print(f"tuned keys in {where}:")
    # Narrow consoles lose the key's digest first, then the counts, the device and the pick's cost.
    old = any((s.key.kernel, s.key.source) in superseded for s in summaries)
    table = FittingTable(
        [
            Column("kernel"),
            Column("source"),
            Column("device", drop=2),
            Column("inputs", wrap=True, fit=32),
            Column("results", right=True, drop=3),
            Column("failed", right=True, drop=3),
            Column("picked", wrap=True, fit=28),
            Column("ms/call", right=True, drop=1),
            Column("key", drop=4),
        ],
        caption="old: a source of the kernel edited since (`kernelpick cache prune --stale` removes its rows)"
        if old
        else "",
    )
    for s in summaries:
        # No pick: every candidate failed, or the tuning was interrupted before it picked.
        picked, cost = ("all failed" if s.failed == s.results else "unfinished"), "-"
        if s.picked is not None:
            picked = candidate_name(s.picked.description)
            cost = f"{s.picked.result.cost_ms:.4f}" if s.picked.result.ok else s.picked.result.status
        table.add_row(
            s.key.kernel,
            _source_cell(s.key, superseded),
            s.key.device,
            key_text(s.key),
            str(s.results),
            str(s.failed),
            picked,
            cost,
            s.key.digest[:12],
        )
    console().print(table)
    return 0


def _source_cell(key: TuningKey, superseded: Collection[tuple[str, str]]) -> str:
    """An autotuned kernel's source as `cache list` shows it: the first digits of its hash, and "old"
    where it is superseded; "-" for a selector's key (its choices have sources of their own)."""
    cache_key = cache_key_of(key.source)
    if cache_key is None:
        return "-"
    return cache_key[:8] + (" old" if (key.kernel, key.source) in superseded else "")


def _cache_show(args: argparse.Namespace) -> int:
    from kernelpick.engine.record import autotune_table
    from kernelpick.reports.data import keys_from_store
    from kernelpick.reports.decisions import decision_groups, print_decisions
    from kernelpick.store.maintenance import describe_toolchain, summarize_keys

    rows, _, _ = _stored_rows(args)
    mine = _of_kernel(args.kernel, rows)
    by_key: dict[str, list[StoredRow]] = {}
    for row in sorted(mine, key=lambda r: (r.result.cost_ms, r.candidate)):
        by_key.setdefault(row.key.digest, []).append(row)
    summaries = summarize_keys(mine)
    # A selector's decisions follow its candidates; --decisions shows them alone, for any kernel.
    tuned = keys_from_store(mine)
    groups = decision_groups(tuned) if args.decisions or any(t.kind == "select" for t in tuned) else []
    if args.json:
        candidates = {
            digest: [
                {
                    "candidate": r.candidate,
                    "description": dict(r.description),
                    "result": r.result.to_dict(),
                    "created": r.created,
                    "picked": r.picked,
                }
                for r in key_rows
            ]
            for digest, key_rows in by_key.items()
        }
        keys = (
            []
            if args.decisions
            else [{**_key_data(s.key), "candidates": candidates[s.key.digest]} for s in summaries]
        )
        decisions = [group.to_dict() for group in groups]
        print(json.dumps({"kernel": args.kernel, "keys": keys, "decisions": decisions}, indent=2))
        return 0
    out = console()
    for s in [] if args.decisions else summaries:
        key_rows = by_key[s.key.digest]
        named = [(candidate_name(r.description), replace(r.result, from_store=False)) for r in key_rows]
        note = (
            f"key {s.key.digest[:12]}; {describe_toolchain(s.key.toolchain)}; source {s.key.source[:30]}; "
            f"stored {_when(max(r.created for r in key_rows))}"
        )
        best = None if s.picked is None else candidate_name(s.picked.description)
        title = f"{s.key.kernel}{key_text(s.key)}"  # as `kernelpick report` titles it
        device = DeviceInfo.recorded(s.key.device, s.key.capability)
        out.print(autotune_table(title, named, device, best=best, note=note))
        out.print()
    print_decisions(out, groups)
    return 0


def _cache_stats(args: argparse.Namespace) -> int:
    from kernelpick.store.maintenance import describe_toolchain, store_stats

    rows, where, corrupt = _stored_rows(args)
    stats = store_stats(rows, corrupt)
    size, wal_size, wal = None, 0, None
    if not args.redis:  # a file: how large it is, with its write-ahead log
        path = store_path(args)
        wal = path.with_name(f"{path.name}-wal")
        size, wal_size = path.stat().st_size, wal.stat().st_size if wal.is_file() else 0
    if args.json:
        data = {
            "store": where,
            "bytes": size,
            "wal_bytes": wal_size,
            **asdict(stats),
            "toolchains": [describe_toolchain(t) for t in stats.toolchains],
        }
        print(json.dumps(data, indent=2))
        return 0
    facts = _table("what", "value", header=False)
    _add_row(facts, "result store", where)
    if size is not None and wal is not None:
        _add_row(facts, "size", _bytes(size) + (f" (+ {_bytes(wal_size)} in {wal.name})" if wal_size else ""))
    _add_row(facts, "rows", f"{stats.rows} ({stats.failed} failed)")
    _add_row(facts, "keys", stats.keys)
    _add_row(facts, "kernels", len(stats.kernels))
    _add_row(facts, "device models", ", ".join(stats.devices) or "-")
    _add_row(facts, "toolchains", "; ".join(describe_toolchain(t) for t in stats.toolchains) or "-")
    _add_row(facts, "stored", f"{_when(stats.oldest)} to {_when(stats.newest)}")
    if stats.corrupt:
        _add_row(facts, "corrupt rows", f"{stats.corrupt}: `kernelpick cache verify` names them")
    out = console()
    out.print(facts)
    if stats.kernels:
        out.print()
        out.print(_kernel_table(stats.kernels))
    return 0


def _cache_export(args: argparse.Namespace) -> int:
    from kernelpick.store.maintenance import describe_toolchain
    from kernelpick.store.table import export_table

    rows, _, _ = _stored_rows(args)
    if args.kernel:
        rows = [row for kernel in dict.fromkeys(args.kernel) for row in _of_kernel(kernel, rows)]
    try:
        table = export_table(rows, device=args.device, toolchain=args.toolchain)
    except TableError as error:
        raise TableError(f"{error} (--device MODEL, --toolchain 'triton V, torch V, CUDA V')") from None
    table.write(args.out)
    tuned = {
        r.key.digest for r in rows if r.key.device == table.device and r.key.toolchain == table.toolchain
    }
    left_out = len(tuned) - len(table.entries)
    print(
        f"wrote {len(table.entries)} entries for {table.device} ({describe_toolchain(table.toolchain)}) "
        f"to {args.out}"
        + (
            f"; {_count(left_out, 'key')} left out: no candidate worked, or the tuning was interrupted "
            "before it picked (`cache list` shows them unpicked; tune them again)"
            if left_out
            else ""
        )
    )
    return 0


def _cache_import(args: argparse.Namespace) -> int:
    from kernelpick.store.keys import Toolchain
    from kernelpick.store.maintenance import describe_toolchain, import_table
    from kernelpick.store.table import read_table

    table = read_table(args.table)
    count = import_table(_open_store(args, create=True), table)
    print(
        f"imported {count} entries for {table.device} ({describe_toolchain(table.toolchain)}) "
        f"from {args.table} into {store_path(args)}"
    )
    if table.toolchain != Toolchain.current():
        print(
            f"note: this process runs {describe_toolchain(Toolchain.current())}: its tuning does not reuse "
            "them (they serve tables exported from this store, for machines with that toolchain)"
        )
    return 0


def _cache_prune(args: argparse.Namespace) -> int:
    from kernelpick.store.maintenance import PruneFilter, kernel_totals, prune

    rules = PruneFilter(args.kernel, args.failed, args.older_than, args.stale, args.corrupt, args.all)
    rules.check()  # before opening: a refused prune touches no file
    store = _open_store(args)
    chosen = prune(store, rules, dry_run=args.dry_run)
    path = store_path(args)
    if not chosen:
        print(f"no rows of {path} match; nothing removed")
        return 0
    results = [c for c in chosen if c.table == "results"]
    picks = len(chosen) - len(results)
    if results:
        console().print(_kernel_table(kernel_totals(results)))
    keys = len({c.key for c in results})
    done = "would remove" if args.dry_run else "removed"
    again = "; run it again without --dry-run to remove them" if args.dry_run else ""
    dangling = f" and {_count(picks, 'pick')} naming no stored result" if picks else ""
    print(f"{done} {_count(len(results), 'row')} of {_count(keys, 'key')}{dangling} from {path}{again}")
    return 0


def _cache_verify(args: argparse.Namespace) -> int:
    from kernelpick.store.maintenance import verify

    path = existing_store(store_path(args))
    found = verify(path)
    if args.json:
        corrupt = [
            {
                "table": c.table,
                "kernel": c.kernel,
                "key": c.key,
                "candidate": c.candidate,
                "problems": list(c.problems),
            }
            for c in found.corrupt
        ]
        data = {
            "store": str(path),
            "rows": found.rows,
            "integrity": list(found.integrity),
            "corrupt": corrupt,
        }
        print(json.dumps({**data, "ok": found.ok}, indent=2))
        return 0 if found.ok else 1
    if found.integrity:
        print(f"SQLite's integrity check finds {path} damaged:")
        for message in found.integrity:
            print(f"  {message}")
        print(
            "Its rows were not checked, and prune cannot mend a damaged file: the next kernelpick to open it "
            "as its store (a tuning, `kernelpick cache stats`) moves it aside and starts a new store with "
            "the rows that can still be read."
        )
        return 1
    if found.corrupt:
        print(f"corrupt rows in {path}:")
        table = _table("kernel", "key", "candidate", "what is wrong")
        for c in found.corrupt:
            _add_row(table, c.kernel, c.key[:12], c.candidate[:12], "; ".join(c.problems))
        console().print(table)
        rows = sum(c.table == "results" for c in found.corrupt)
        picks = len(found.corrupt) - rows
        print(
            f"{rows} of {found.rows} rows are corrupt"
            + (f", and {_count(picks, 'pick')} names no stored result" if picks else "")
            + ": kernelpick cannot read them; remove them with `kernelpick cache prune --corrupt`"
        )
        return 1
    print(f"all {found.rows} rows of {path} are sound")
    return 0


def store_command(args: argparse.Namespace) -> int:
    """The old `kernelpick store`: `cache stats`, or with --clear `cache prune`."""
    print(
        "note: `kernelpick store` is now `kernelpick cache stats` (and `kernelpick cache prune` for --clear)",
        file=sys.stderr,
    )
    args.store = args.redis = None
    if not args.clear:
        args.json = False
        return _cache_stats(args)
    everything = args.kernel is None
    args.failed = args.stale = args.corrupt = args.dry_run = False
    args.older_than, args.all = None, everything
    return _cache_prune(args)


def _toolchain(text: str) -> Toolchain:
    from kernelpick.store.maintenance import parse_toolchain

    try:
        return parse_toolchain(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_cache_commands(commands: Any) -> None:
    """Add `kernelpick cache list|show|stats|export|import|prune|verify` to the `kernelpick` parser.

    Args:
        commands: the `kernelpick` parser's subparsers; each command's handler takes the parsed
            arguments and returns the exit status.
    """
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--store", metavar="PATH", help=STORE_HELP)
    readable = argparse.ArgumentParser(add_help=False)  # where rows are read from: a file or Redis
    either = readable.add_mutually_exclusive_group()
    either.add_argument("--store", metavar="PATH", help=STORE_HELP)
    either.add_argument(
        "--redis", metavar="URL", help="read the rows of this Redis store instead (redis://host:6379/0)"
    )
    cache = commands.add_parser(
        "cache", help="list, show, check, prune, export and import what the result store holds"
    ).add_subparsers(dest="cache_command", required=True, metavar="COMMAND")

    listing = cache.add_parser("list", parents=[readable], help="one line per tuned key, with its pick")
    listing.add_argument("--kernel", help="only this kernel's keys")
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    listing.set_defaults(handler=_cache_list)

    show = cache.add_parser(
        "show",
        parents=[readable],
        help="every candidate of each of a kernel's keys, then a selector's decisions per key (per M)",
    )
    show.add_argument("kernel", metavar="KERNEL", help="the kernel's name, as `cache list` shows it")
    show.add_argument(
        "--decisions",
        action="store_true",
        help="only the decisions: per key (per M for a matrix product) the pick, what it beat, and its "
        "share of the device's memory and compute limits",
    )
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=_cache_show)

    stats = cache.add_parser("stats", parents=[readable], help="size, counts, devices, toolchains, dates")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=_cache_stats)

    export = cache.add_parser(
        "export", parents=[readable], help="write the pick of every key for one device as a deployment table"
    )
    export.add_argument("out", metavar="OUT.json", help="the table file to write")
    export.add_argument("--device", metavar="MODEL", help="the device model (needed when several are stored)")
    export.add_argument(
        "--toolchain",
        type=_toolchain,
        metavar="'triton V, torch V, CUDA V'",
        help="the toolchain, as `cache stats` names it (needed when several are stored for the device)",
    )
    export.add_argument(
        "--kernel", action="append", metavar="K", help="only this kernel (repeat for several)"
    )
    export.set_defaults(handler=_cache_export)

    load = cache.add_parser(
        "import", parents=[where], help="save a deployment table's entries into the store"
    )
    load.add_argument("table", metavar="TABLE.json", help="a table written by `cache export`")
    load.set_defaults(handler=_cache_import)

    prune = cache.add_parser(
        "prune", parents=[where], help="remove the rows that match every filter given (or --all)"
    )
    prune.add_argument("--kernel", help="this kernel's rows")
    prune.add_argument("--failed", action="store_true", help="rows whose candidate failed")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="rows stored more than DAYS days ago")
    prune.add_argument(
        "--stale",
        action="store_true",
        help="rows never read again: of another triton/torch/CUDA version, an older measurement version, or "
        "a kernel source superseded by a newer one of the same function (`cache list` marks it old)",
    )
    prune.add_argument("--corrupt", action="store_true", help="rows `cache verify` finds corrupt")
    prune.add_argument("--all", action="store_true", help="every row (takes no filter)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    prune.set_defaults(handler=_cache_prune)

    check = cache.add_parser(
        "verify", parents=[where], help="check the file and every row; exit 1 when any is corrupt"
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(handler=_cache_verify)

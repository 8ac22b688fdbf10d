"""Looking after a result store: what it holds per key, totals, corrupt or stale rows, pruning."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from kernelpick.bench.benchmarker import MEASUREMENT_VERSION
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.verify import VERIFICATION_VERSION
from kernelpick.errors import StoreError
from kernelpick.store.base import ResultStore, StoredRow, parse_description, parse_result
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.origins import superseded_sources
from kernelpick.store.sqlite import RawRow, SQLiteStore
from kernelpick.store.table import DeploymentTable

T = TypeVar("T")

SECONDS_PER_DAY = 86400.0
#: The `kernelpick cache prune` flags that choose rows, as `PruneFilter` fields.
PRUNE_FILTERS = ("--kernel", "--failed", "--older-than", "--stale", "--corrupt")


@dataclass(frozen=True, slots=True)
class CheckedRow:
    """One stored row and what is wrong with it; `row` is the row as tools read it, None when corrupt."""

    kernel: str  # the kernel column
    key: str  # the key digest column
    candidate: str
    status: str  # the status column
    created: float | None  # the created column, None when it holds no number
    tuning_key: TuningKey | None  # the key rebuilt from key_data, None when that fails
    row: StoredRow | None
    problems: tuple[str, ...]  # empty for a sound row
    #: "results" for a stored result; "picks" for a key's pick that names no stored result (a row
    #: of the picks table, which pruning removes alone).
    table: Literal["results", "picks"] = "results"

    @property
    def corrupt(self) -> bool:
        return bool(self.problems)


@dataclass(frozen=True, slots=True)
class Verification:
    """What `kernelpick cache verify` found: damage to the file itself, and each corrupt row."""

    integrity: tuple[str, ...]  # what SQLite's integrity check reports; empty when the file is sound
    rows: int | None  # how many rows were checked; None when the file is damaged (they were not)
    corrupt: tuple[CheckedRow, ...]

    @property
    def ok(self) -> bool:
        return not self.integrity and not self.corrupt


@dataclass(frozen=True, slots=True)
class KeySummary:
    """One tuned key: how many candidates are stored for it, how many failed, and which one it picked."""

    key: TuningKey
    results: int
    failed: int
    picked: StoredRow | None  # None when no tuning of it recorded a pick (or that row is gone)


@dataclass(frozen=True, slots=True)
class KernelTotals:
    """One kernel's share of some rows: its keys, its rows, and how many of them failed or are corrupt."""

    kernel: str
    keys: int
    results: int
    failed: int
    corrupt: int = 0


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Totals over a store's readable rows, and how many rows could not be read."""

    rows: int
    keys: int
    kernels: tuple[KernelTotals, ...]
    devices: tuple[str, ...]
    toolchains: tuple[Toolchain, ...]
    failed: int
    corrupt: int
    oldest: float | None  # unix time
    newest: float | None


@dataclass(frozen=True, slots=True)
class PruneFilter:
    """Which rows `kernelpick cache prune` removes: those that match every filter given.

    `everything` removes every row and takes no filter.
    """

    kernel: str | None = None
    failed: bool = False
    older_than_days: float | None = None
    stale: bool = False
    corrupt: bool = False
    everything: bool = False

    def check(self) -> None:
        """Raises:
        StoreError: no filter and not `everything` (pruning would wipe the store unasked), or both.
        """
        filtered = (
            self.kernel is not None
            or self.failed
            or self.older_than_days is not None
            or self.stale
            or self.corrupt
        )
        if self.everything and filtered:
            raise StoreError("--all removes every row and takes no filter: give either --all or filters")
        if not self.everything and not filtered:
            raise StoreError(
                f"prune removes the rows that match its filters and none was given: pass one or more of "
                f"{', '.join(PRUNE_FILTERS)}, or --all to remove every row"
            )
        if self.older_than_days is not None and self.older_than_days < 0:
            raise StoreError(f"--older-than takes a number of days >= 0, got {self.older_than_days}")

    def matches(self, row: CheckedRow, now: float, superseded: Collection[tuple[str, str]] = ()) -> bool:
        """Whether `row` matches every filter given; `superseded`: the (kernel, source) pairs whose
        source is superseded (`kernelpick.store.origins`), stale too."""
        if self.everything:
            return True
        if self.kernel is not None and row.kernel != self.kernel:
            return False
        if self.failed and row.status == "ok":
            return False
        if self.older_than_days is not None and (
            row.created is None or row.created > now - self.older_than_days * SECONDS_PER_DAY
        ):
            return False
        if self.stale and (
            row.tuning_key is None
            or (
                stale_reason(row.tuning_key) is None
                and (row.tuning_key.kernel, row.tuning_key.source) not in superseded
            )
        ):
            return False
        return not (self.corrupt and not row.corrupt)


def check_row(raw: RawRow) -> CheckedRow:
    """Check one row as stored: every column parses and agrees with the others."""
    problems: list[str] = []
    tuning_key = _tuning_key(raw, problems)
    description = _json_column(raw.description, "description", problems)
    described = _checked(description, parse_description, problems)
    result = _result(raw, problems)
    created = (
        raw.created if isinstance(raw.created, (int, float)) and not isinstance(raw.created, bool) else None
    )
    if created is None:
        problems.append(f"created is {raw.created!r}, not a unix time")
    picked = raw.pick is not None and raw.pick == raw.candidate
    if picked and result is not None and not result.ok:
        problems.append(
            f"its key's pick names it, and its status is {result.status!r}: a pick is an ok result"
        )
    row = None
    if (
        not problems
        and tuning_key is not None
        and described is not None
        and result is not None
        and created is not None
    ):
        row = StoredRow(tuning_key, str(raw.candidate), described, result, created, picked)
    return CheckedRow(
        str(raw.kernel),
        str(raw.key),
        str(raw.candidate),
        str(raw.status),
        created,
        tuning_key,
        row,
        tuple(problems),
    )


def checked_rows(store: SQLiteStore, kernel: str | None = None) -> list[CheckedRow]:
    """Every row of `store` (or of one kernel), checked."""
    return [check_row(raw) for raw in store.raw_rows(kernel)]


def dangling_picks(store: SQLiteStore, kernel: str | None = None) -> list[CheckedRow]:
    """Each pick of `store` (or of one kernel's keys) that names no stored result, as a corrupt row of
    the picks table: readers pass over it; `kernelpick cache prune --corrupt` removes it."""
    problem = "its key's pick names this candidate, and no result of it is stored"
    return [
        CheckedRow(
            str(of_kernel or "?"), str(digest), str(candidate), "-", None, None, None, (problem,), "picks"
        )
        for digest, candidate, of_kernel in store.dangling_picks()
        if kernel is None or of_kernel == kernel
    ]


def readable_rows(store: SQLiteStore, kernel: str | None = None) -> tuple[list[StoredRow], list[CheckedRow]]:
    """The rows that are sound, and the corrupt ones with the picks that name no stored result
    (`kernelpick cache verify` names them)."""
    checked = checked_rows(store, kernel)
    corrupt = [c for c in checked if c.corrupt] + dangling_picks(store, kernel)
    return [c.row for c in checked if c.row is not None], corrupt


def verify(path: Path) -> Verification:
    """Check the store file at `path` with SQLite's integrity check, then, when it is sound, every row
    with `check_row`. A damaged file's rows are not read: opening it as a store would move it aside."""
    integrity = SQLiteStore.integrity_problems(path)
    if integrity:
        return Verification(tuple(integrity), None, ())
    store = SQLiteStore(path)
    checked = checked_rows(store)
    return Verification(
        (), len(checked), tuple(c for c in checked if c.corrupt) + tuple(dangling_picks(store))
    )


def prune(store: SQLiteStore, rules: PruneFilter, *, dry_run: bool = False) -> list[CheckedRow]:
    """Remove the rows `rules` match (and picks left pointing at no row); returns them.

    Args:
        store: the store to prune.
        rules: which rows go.
        dry_run: only say which rows would go.

    Raises:
        StoreError: `rules` has no filter (see `PruneFilter.check`), or names a kernel with no rows.
    """
    rules.check()
    now = time.time()
    rows = checked_rows(store, rules.kernel)
    if rules.kernel is not None and not rows:
        raise unknown_kernel(rules.kernel, (totals["kernel"] for totals in store.summary()))
    superseded = (
        superseded_sources(
            ((c.tuning_key, c.created) for c in rows if c.tuning_key is not None and c.created is not None),
            store.path.parent,
        )
        if rules.stale
        else frozenset()
    )
    chosen = [c for c in rows if rules.matches(c, now, superseded)]
    # A pick naming no stored result has no status, age or key: --corrupt (with --kernel) alone takes it.
    if rules.corrupt and not (rules.failed or rules.older_than_days is not None or rules.stale):
        chosen += dangling_picks(store, rules.kernel)
    if not dry_run and chosen:
        store.remove((c.key, c.candidate) for c in chosen)  # and every pick left naming no result
    return chosen


def current_versions() -> tuple[str, str]:
    """The measurement version autotune keys start with and the selection version of selector keys."""
    return MEASUREMENT_VERSION, VERIFICATION_VERSION


def stale_reason(key: TuningKey) -> str | None:
    """Why results under `key` will never be read again by this kernelpick (None when they may be)."""
    now = Toolchain.current()
    if key.toolchain != now:
        return f"tuned under {describe_toolchain(key.toolchain)}; this is {describe_toolchain(now)}"
    measurement, selection = current_versions()
    if (
        key.source.startswith(f"{measurement}:")
        or key.source == selection
        or key.source.startswith(f"{selection}:")
    ):
        return None
    version = ":".join(key.source.split(":")[: 2 if key.source.startswith("select-") else 1])
    return f"measured under version {version!r}; now {measurement!r} (autotune) and {selection!r} (selectors)"


def describe_toolchain(toolchain: Toolchain) -> str:
    """How tools name a toolchain: `triton 3.6.0, torch 2.11.0+cu130, CUDA 13.0` (`parse_toolchain` reads it)."""
    return toolchain.describe()


def parse_toolchain(text: str) -> Toolchain:
    """The toolchain `describe_toolchain` wrote as `text`.

    Raises:
        ValueError: `text` is not of that form; the message shows the form.
    """
    match = re.fullmatch(
        r"\s*triton\s+(\S+?)\s*,\s*torch\s+(\S+?)\s*,\s*cuda\s+(\S+?)\s*", text, re.IGNORECASE
    )
    if match is None:
        raise ValueError(
            f"expected 'triton VERSION, torch VERSION, CUDA VERSION' (CUDA none on CPU), got {text!r}"
        )
    triton, torch, cuda = match.groups()
    return Toolchain(triton, torch, None if cuda.lower() == "none" else cuda)


def import_table(store: ResultStore, table: DeploymentTable) -> int:
    """Save every entry of `table` into `store`, each as its key's pick; returns how many."""
    stored = table.stored()
    for key, result in stored:
        store.save(key, [result], pick=result.digest)
    return len(stored)


def summarize_keys(rows: Iterable[StoredRow]) -> list[KeySummary]:
    """One summary per tuned key, by kernel and then by key inputs."""
    by_key: dict[str, list[StoredRow]] = {}
    for row in rows:
        by_key.setdefault(row.key.digest, []).append(row)
    summaries = [
        KeySummary(
            group[0].key,
            len(group),
            sum(not r.result.ok for r in group),
            next((r for r in group if r.picked), None),
        )
        for group in by_key.values()
    ]
    return sorted(
        summaries, key=lambda s: (s.key.kernel, s.key.device, json.dumps(s.key.inputs), s.key.digest)
    )


def store_stats(rows: Sequence[StoredRow], corrupt: Sequence[CheckedRow] = ()) -> StoreStats:
    """Totals over the sound `rows`; `corrupt` are the rows that could not be read (counted in total
    and per kernel, apart from the sound ones)."""
    kernels: dict[str, list[StoredRow]] = {}
    for row in rows:
        kernels.setdefault(row.key.kernel, []).append(row)
    corrupt = [c for c in corrupt if c.table == "results"]  # a pick naming no result is no row
    corrupt_of = Counter(c.kernel for c in corrupt)
    created = [r.created for r in rows]
    return StoreStats(
        rows=len(rows),
        keys=len({r.key.digest for r in rows}),
        kernels=tuple(
            KernelTotals(
                name,
                len({r.key.digest for r in group}),
                len(group),
                sum(not r.result.ok for r in group),
                corrupt_of[name],
            )
            for name, group in sorted(kernels.items())
        )
        + tuple(
            KernelTotals(name, 0, 0, 0, count)
            for name, count in sorted(corrupt_of.items())
            if name not in kernels
        ),
        devices=tuple(sorted({r.key.device for r in rows})),
        toolchains=tuple(sorted({r.key.toolchain for r in rows}, key=describe_toolchain)),
        failed=sum(not r.result.ok for r in rows),
        corrupt=len(corrupt),
        oldest=min(created, default=None),
        newest=max(created, default=None),
    )


def kernel_totals(rows: Iterable[CheckedRow]) -> list[KernelTotals]:
    """Per kernel, by name: what share of the results rows among `rows` (e.g. those prune chose) is its."""
    kernels: dict[str, list[CheckedRow]] = {}
    for row in rows:
        if row.table == "results":
            kernels.setdefault(row.kernel, []).append(row)
    return [
        KernelTotals(
            name,
            len({r.key for r in group}),
            len(group),
            sum(r.status != "ok" for r in group),
            sum(r.corrupt for r in group),
        )
        for name, group in sorted(kernels.items())
    ]


def unknown_kernel(kernel: str, stored: Iterable[str]) -> StoreError:
    """The error for a kernel the store holds nothing of, listing those it holds."""
    names = sorted(set(stored))
    return StoreError(
        f"no results of kernel {kernel!r} are stored; stored kernels: {', '.join(names) or 'none'}"
    )


# A column that did not parse (json.loads can return None, so None cannot say so).
_UNREADABLE: Any = object()


def _json_column(text: Any, column: str, problems: list[str]) -> Any:
    if not isinstance(text, str):
        problems.append(f"{column} holds {type(text).__name__} {text!r:.40}, not JSON text")
        return _UNREADABLE
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        problems.append(f"{column} is not JSON ({error})")
        return _UNREADABLE
    except RecursionError:
        problems.append(f"{column} is JSON nested too deep to decode")
        return _UNREADABLE


def _parsed(text: Any, column: str, what: str, build: Callable[[Any], T], problems: list[str]) -> T | None:
    """`build` of the column's JSON, or None (with the problem noted) when either fails."""
    data = _json_column(text, column, problems)
    if data is _UNREADABLE:
        return None
    try:
        return build(data)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        problems.append(f"{column} is not {what} ({type(error).__name__}: {str(error)[:200]})")
        return None
    except RecursionError:
        problems.append(f"{column} is not {what} (nested too deep)")
        return None


def _tuning_key(raw: RawRow, problems: list[str]) -> TuningKey | None:
    key = _parsed(raw.key_data, "key_data", "a tuning key", _hashed_key, problems)
    if key is None:
        return None
    if key.digest != raw.key:
        problems.append(
            f"key_data hashes to {key.digest[:12]}, the row is filed under key {str(raw.key)[:12]}"
        )
    if key.kernel != raw.kernel:
        problems.append(f"kernel column says {raw.kernel!r}, key_data says {key.kernel!r}")
    return key


def _hashed_key(data: Any) -> TuningKey:
    """`TuningKey.from_dict` with its digest worked out now (where nesting too deep shows)."""
    key = TuningKey.from_dict(data)
    _ = key.digest
    return key


def _checked(data: Any, parse: Callable[[Any], T], problems: list[str]) -> T | None:
    """`parse` of a column's JSON (`kernelpick.store.base`'s checks, as a store's load makes them), or
    None (with the problem noted) when the column is unreadable or `parse` refuses it."""
    if data is _UNREADABLE:
        return None
    try:
        return parse(data)
    except ValueError as error:
        problems.append(str(error))
        return None
    except RecursionError:
        problems.append("nested too deep to read")
        return None


def _result(raw: RawRow, problems: list[str]) -> BenchmarkResult | None:
    result = _checked(_json_column(raw.result, "result", problems), parse_result, problems)
    if result is None:
        return None
    median = None if result.timing is None else result.timing.median_ms
    if raw.status != result.status:
        problems.append(f"status column says {raw.status!r}, the result says {result.status!r}")
    if raw.median_ms != median:
        problems.append(f"median_ms column says {raw.median_ms!r}, the result says {median!r}")
    return result

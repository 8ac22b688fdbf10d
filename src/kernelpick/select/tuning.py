"""The steps every tuning takes, written once for a tuned kernel and a selector alike.

A tuning of one key looks for a deployment table's winner, reads the store's results (once, and
only when needed), leaves what the store holds out of what is measured (and measures nothing under
`KERNELPICK_NO_TUNING=1`), stores each result as it is measured, picks (the fastest, unless it does
not clearly beat the reference) and saves what was measured with the pick. A tuning interrupted
(Ctrl-C, SIGTERM, a crash) has stored what it measured, without a pick: the next one measures only
the rest, then picks. What its candidates are, how they are measured and how the
winner is called is its front's: `kernelpick.tune` (the `triton.autotune` front, whose candidates
are one kernel's configs) and `Selector` (choices of any kind). Candidates are named here by digest.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from kernelpick import settings
from kernelpick.bench.pick import Pick, pick
from kernelpick.bench.result import BenchmarkResult
from kernelpick.errors import TuningRequired
from kernelpick.signals import Terminated, terminable
from kernelpick.store import ResultStore, StoredResult, TuningKey
from kernelpick.store.base import picked
from kernelpick.store.deploy import TableHit, tabled_winner, tuning_required
from kernelpick.store.table import TableEntry

_C = TypeVar("_C")
log = logging.getLogger("kernelpick.select")


class Tuning:
    """One tuning of one key, from its start: its store key and store, and the seconds of its steps.

    Args:
        subject: what is tuned, for messages: "kernel `add`", "selector `mm`".
        described: the key for people, for messages.
        key: the store key.
        store: where results are remembered (None: nowhere, `cache=False`).
        device: the device's name, for messages.
        started: when the tuning started (`time.perf_counter()`; default: now).
    """

    def __init__(
        self,
        subject: str,
        described: str,
        key: TuningKey,
        store: ResultStore | None,
        device: str,
        started: float | None = None,
    ) -> None:
        self.subject = subject
        self.described = described
        self.key = key
        self.store = store
        self.device = device
        self.started = time.perf_counter() if started is None else started
        #: Seconds per step (table, store_read, store_write; the front adds compile, benchmark, ...).
        self.phases: dict[str, float] = {}
        self._stored: Mapping[str, StoredResult] | None = None

    @property
    def seconds(self) -> float:
        """Seconds since the tuning started."""
        return time.perf_counter() - self.started

    def stored(self) -> Mapping[str, StoredResult]:
        """The store's results for this key, by candidate digest: read once, when first asked for."""
        if self._stored is None:
            started = time.perf_counter()
            self._stored = self.store.load(self.key) if self.store is not None else {}
            self.phases["store_read"] = time.perf_counter() - started
        return self._stored

    def tabled(
        self, candidate_of: Callable[[TableEntry], _C | None], digests: Callable[[], Collection[str]]
    ) -> tuple[_C, TableHit] | None:
        """The winner the deployment tables give for this key, if any (`kernelpick.store.deploy`):
        the exact key's, else the nearest key's when the store cannot answer alone, that is when it
        lacks one of the candidates `digests()` names (asked only then).

        Args:
            candidate_of: the candidate a table entry names, or None (one pruned away, say).
            digests: every candidate's digest.
        """
        started = time.perf_counter()
        found = tabled_winner(self.key, candidate_of, lambda: set(digests()) <= self.stored().keys())
        self.phases["table"] = time.perf_counter() - started
        return found

    def split(self, digests: Sequence[str]) -> tuple[dict[str, BenchmarkResult], list[str]]:
        """The results the store holds for `digests`, and the digests left to measure, in order.

        Raises:
            TuningRequired: some are left and `KERNELPICK_NO_TUNING=1`; the message says what was
                looked at.
        """
        stored = self.stored()
        results = {d: stored[d].result for d in digests if d in stored}
        todo = [d for d in digests if d not in results]
        if todo and settings.current().no_tuning:
            raise TuningRequired(tuning_required(self.subject, self.described, self.device, len(todo)))
        return results, todo

    @contextlib.contextmanager
    def measuring(
        self, describe: Callable[[str], Mapping[str, Any]]
    ) -> Iterator[Callable[[str, BenchmarkResult], None]]:
        """Within the block, the front measures; what it yields is the measurement's `on_done`,
        which stores each result at once, without a pick (`describe(digest)`: the candidate as
        plain data). SIGTERM ends the block as Ctrl-C does (`kernelpick.signals.terminable`): the
        workers and compilers still busy are stopped, what was measured stays stored, and the
        next tuning of the key measures only the rest.
        """

        stored: list[str] = []

        def measured(digest: str, result: BenchmarkResult) -> None:
            self._write([StoredResult(digest, describe(digest), result)], None)
            if result.storable:
                stored.append(digest)

        with terminable():
            try:
                yield measured
            except (KeyboardInterrupt, Terminated) as interruption:
                kept = (
                    f"the {len(set(stored))} results measured are stored"
                    if stored
                    else "nothing was measured yet"
                )
                if self.store is None:
                    kept = "nothing is stored (the result store is off)"
                log.warning(
                    "%s %s was interrupted (%s): %s; the next tuning measures only the rest",
                    self.subject,
                    self.described,
                    "Ctrl-C" if isinstance(interruption, KeyboardInterrupt) else "SIGTERM",
                    kept,
                )
                raise

    def save(self, rows: Sequence[StoredResult], winner: str | None) -> None:
        """Store what was measured now, again (as the measurement ended: a GPU's closest few are
        timed twice, a config's compile seconds are known) and the pick among it and the stored
        results (None: every candidate failed). With nothing measured now, the pick is stored
        only where the key has none: a tuning stopped after its last result, before it picked."""
        if winner is not None and self.store is not None and not any(r.result.storable for r in rows):
            if picked(self.store, self.key) is None:
                self._write([], winner)
            return
        self._write(rows, winner)

    def _write(self, rows: Sequence[StoredResult], winner: str | None) -> None:
        """Store `rows` that may be stored (not a search's given-up compile), and `winner`."""
        rows = [row for row in rows if row.result.storable]
        if self.store is None or not (rows or winner):
            return
        started = time.perf_counter()
        self.store.save(self.key, rows, pick=winner)
        self.phases["store_write"] = self.phases.get("store_write", 0.0) + time.perf_counter() - started


def pick_with_incumbent(
    results: Mapping[str, BenchmarkResult],
    reference: str | None,
    *,
    name: Callable[[str], str] = str,
) -> Pick[str]:
    """The candidate to run: the fastest, unless it does not clearly beat the reference
    (`kernelpick.bench.pick`). Without a reference, the incumbent stands in for one: the best of
    the stored results, when others were measured beside them now (a new config joining a space
    does not displace the winner on noise).
    """
    if reference is None or reference not in results:
        stored = [d for d, r in results.items() if r.ok and r.from_store]
        reference = (
            min(stored, key=lambda d: results[d].cost_ms) if stored and len(stored) < len(results) else None
        )
    return pick(results, reference, name=name)

"""The steps every tuning takes, written once for a tuned kernel and a selector alike."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import inf
from typing import Any, TypeVar

import torch

from kernelpick import settings
from kernelpick.bench.measure import OnDone
from kernelpick.bench.pick import Pick, pick
from kernelpick.bench.result import BenchmarkResult
from kernelpick.compile.precompile import patience
from kernelpick.console import warn_once
from kernelpick.device import capturing
from kernelpick.engine.choice import Choice
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.engine.ranks import KeyShare, RankJob, rank_job
from kernelpick.engine.searching import search_choices
from kernelpick.errors import StoreError, TuningRequired
from kernelpick.search.registry import default_strategy_name
from kernelpick.search.run import SearchTrace
from kernelpick.search.space import Space
from kernelpick.signals import Terminated, terminable
from kernelpick.store import CandidateResult, ResultStore, TuningKey, default_store
from kernelpick.store.base import load_candidates, picked
from kernelpick.store.claims import Claim, Claims, Finished, claims_of
from kernelpick.store.deploy import TableHit, tabled_pick, tuning_required
from kernelpick.store.table import TableEntry
from kernelpick.workers.pool import tuning_in_progress

_C = TypeVar("_C")
log = logging.getLogger("kernelpick.select")
_WAITED_TOO_LONG = (
    ": another process has been tuning it for over %g s (KERNELPICK_WAIT_TIMEOUT); tuning it here too"
)
_UNPUBLISHED = (
    ": another rank took part %d of its candidates and has not published it in %g s "
    "(KERNELPICK_WAIT_TIMEOUT); measuring it here"
)
_INTERRUPTED = " was interrupted (%s): %s; the next tuning measures only the rest"

#: Measuring or searching as a tuning calls them: what to measure, the results known, `OnDone`, and
#: the lowest cost the other ranks of a job measured now.
_Measured = Callable[
    [list[str], Mapping[str, BenchmarkResult], OnDone, Callable[[], float]], Mapping[str, BenchmarkResult]
]
#: The pick among results, or None when none of them is ok.
Choose = Callable[[Mapping[str, BenchmarkResult]], "Pick[str] | None"]


@dataclass(frozen=True, slots=True)
class Settled:
    """How a key's tuning ended (`Tuning.settle`).

    Attributes:
        results: every candidate's result had (stored, measured or received), in their order.
        fresh: the candidates whose results the store did not hold: measured here, or by another rank.
        pick: the candidate to run (None: every candidate failed).
        note: why it was picked, for the AUTOTUNE table ("" when the fastest simply won).
        picked_by: who picked it when not this process: "another process", "rank 1"; else "".
        searches: each searched space's trace, by the space's name (none: nothing was searched).
    """

    results: dict[str, BenchmarkResult]
    fresh: frozenset[str]
    pick: str | None
    note: str
    picked_by: str = ""
    searches: Mapping[str, SearchTrace] = field(default_factory=dict)


@dataclass(eq=False, repr=False)
class Tuning:
    """One tuning of one key, from its start: its store key and store, and the seconds of its steps.

    Args:
        subject: what is tuned, for messages: "kernel `add`", "selector `mm`".
        described: the key for people, for messages.
        key: the store key.
        store: where results are remembered (None: nowhere, `cache=False`).
        device: the device's name, for messages.
        started: when the tuning started (`time.perf_counter()`; default: now).
        verified_against: the digest of the candidate the others' outputs are checked against, if any.
    """

    subject: str
    described: str
    key: TuningKey
    store: ResultStore | None
    device: str
    started: float = field(default_factory=time.perf_counter)
    verified_against: str | None = None
    #: Seconds per step (table, store_read, store_write, wait; the front adds compile, benchmark, ...).
    phases: dict[str, float] = field(default_factory=dict, init=False)
    _stored: Mapping[str, BenchmarkResult] | None = field(default=None, init=False)
    _claims: Claims | None = field(default=None, init=False)  # set at the first store read when wanted
    _mark: Finished | None = field(default=None, init=False)  # the key's last finished tuning as of then
    _claim: Claim | None = field(default=None, init=False)  # the key, while this tuning holds it
    _alone: bool = field(default=False, init=False)  # without claims (not wanted, or they failed)
    _workers_held: contextlib.ExitStack[bool | None] = field(default_factory=contextlib.ExitStack, init=False)
    _describe: Callable[[str], Mapping[str, Any]] = field(init=False)  # set by `measuring`, for `save`

    def __enter__(self) -> Tuning:
        self._workers_held.enter_context(tuning_in_progress())  # its measurements share the workers
        return self

    def __exit__(self, *exception: object) -> None:
        """Let go of the workers, and of the key if this tuning ended before it saved a pick."""
        with self._workers_held:  # closed last, whatever the release raises
            claim, self._claim = self._claim, None
            if claim is not None:
                claim.release()

    @property
    def seconds(self) -> float:
        """Seconds since the tuning started."""
        return time.perf_counter() - self.started

    def stored(self, candidates: Collection[str]) -> Mapping[str, BenchmarkResult]:
        """The store's results for this key of `candidates` (by digest) alone, read once, when first
        asked for: other candidates a shared store's other writers added are not read."""
        if self._stored is None:
            started = time.perf_counter()
            # The key's last finished tuning, noted before the store is read (a tuning finishing after
            # it changes the mark), where processes sharing the store claim keys and this is no rank.
            if self._claims is None and not self._alone:
                current = settings.current()
                wanted = current.one_tuning and not current.no_tuning and rank_job() is None
                self._claims = claims_of(self.store) if wanted and self.store is not None else None
                self._alone = self._claims is None
            try:
                self._mark = self._claims.last(self.key) if self._claims is not None else None
            except StoreError as error:
                self._go_alone(error)
            rows = load_candidates(self.store, self.key, candidates) if self.store is not None else {}
            self._stored = {digest: row.result for digest, row in rows.items()}
            if self.verified_against in candidates and self.verified_against not in self._stored:
                # Verified against another reference (edited, or made anew with other values): not trusted.
                self._stored = {}
            self.phases["store_read"] = self.phases.get("store_read", 0.0) + time.perf_counter() - started
        return self._stored

    def tabled(
        self, candidate_of: Callable[[TableEntry], _C | None], digests: Callable[[], Collection[str]]
    ) -> tuple[_C, TableHit] | None:
        """The pick the deployment tables give for this key, if any: the exact key's, else the nearest
        key's when the store lacks one of the candidates `digests()` names (asked only then).

        Args:
            candidate_of: the candidate a table entry names, or None (one pruned away, say).
            digests: every candidate's digest.
        """
        started = time.perf_counter()
        found = tabled_pick(
            self.key, candidate_of, lambda: set(everyone := digests()) <= self.stored(everyone).keys()
        )
        self.phases["table"] = time.perf_counter() - started
        return found

    def split(self, digests: Sequence[str]) -> tuple[dict[str, BenchmarkResult], list[str]]:
        """The results the store holds for `digests`, and the digests left to measure, in order.

        Raises:
            TuningRequired: some are left and `KERNELPICK_NO_TUNING=1`.
        """
        stored = self.stored(digests)
        results = {d: stored[d] for d in digests if d in stored}
        todo = [d for d in digests if d not in results]
        if todo and settings.current().no_tuning:
            raise TuningRequired(tuning_required(self.subject, self.described, self.device, len(todo)))
        return results, todo

    def settle(
        self,
        candidates: Mapping[str, Choice],
        strategy: str | None,
        measuring: ChoiceMeasuring,
        ranking: str = "graph",
        structure: Space | None = None,
    ) -> Settled:
        """Measure what the store lacks of `candidates` (by digest) with `measuring` and pick, once
        for every process that needs the key now: as the ranks of a job, or as the one process that
        claimed the key (the others wait for its pick). `strategy` (None: `KERNELPICK_SEARCH`):
        "exhaustive" measures all (the ranks take parts of it); another searches each config space
        (`search_choices`; `structure`: a tuned kernel's `Space`). The pick is
        `pick_against_reference`'s, against `measuring.reference_digest`, as `ranking` costs a call.

        Raises:
            TuningRequired: something is left to measure and `KERNELPICK_NO_TUNING=1`.
        """
        strategy = strategy or default_strategy_name()
        digests, kept = list(candidates), measuring.reference_digest
        traces: dict[str, SearchTrace] = {}

        def choose(results: Mapping[str, BenchmarkResult]) -> Pick[str] | None:
            if not any(r.ok for r in results.values()):
                return None
            return pick_against_reference(results, kept, name=lambda d: candidates[d].name, measure=ranking)

        def measured(
            todo: list[str],
            known: Mapping[str, BenchmarkResult],
            on_done: OnDone,
            best_ms: Callable[[], float],
        ) -> Mapping[str, BenchmarkResult]:
            if strategy == "exhaustive":
                return measuring.measure([candidates[d] for d in todo], on_done, best_ms)
            measure = functools.partial(measuring.measure, finished=on_done, best_ms=best_ms)
            with patience(settings.current().search_patience):
                found, searched = search_choices(
                    strategy, list(candidates.values()), known, measure, kept, structure
                )
            traces.update(searched)
            return {d: r for d, r in found.items() if d not in known}

        described = lambda digest: candidates[digest].description()  # noqa: E731
        job = None if settings.current().no_tuning else rank_job()
        if job is not None:
            divisible = strategy == "exhaustive"  # a search measures each batch from those before it
            settled = self._settle_as_rank(job, digests, measured, choose, described, divisible)
            return replace(settled, searches=traces)
        # The one process that tunes the key now: it claimed it, or no claims are wanted.
        results, todo = self.split(digests)
        if todo:
            waited = self._claim_or_adopt(digests, choose)
            if isinstance(waited, Settled):
                return waited
            if waited:  # what another process measured meanwhile is not measured again
                results, todo = self.split(digests)
        found: Mapping[str, BenchmarkResult] = {}
        if todo:
            with self.measuring(described) as on_done:
                found = measured(todo, results, on_done, lambda: inf)
        return replace(self._settled(digests, {**results, **found}, results, choose), searches=traces)

    def _settled(
        self,
        digests: Sequence[str],
        results: Mapping[str, BenchmarkResult],
        stored: Collection[str],
        choose: Choose,
        agree: Callable[[str | None], tuple[str | None, str]] | None = None,
    ) -> Settled:
        """The pick `choose` makes, or the one `agree` returns for it with who picked it ("": this
        process); the results not of `stored` are fresh."""
        ordered = {d: results[d] for d in digests if d in results}
        chosen = choose(ordered)
        pick, note = (chosen.best, chosen.note) if chosen is not None else (None, "")
        agreed, by = (pick, "") if agree is None else agree(pick)
        if agreed != pick:
            pick, note = agreed, f"the pick of {by}"
        return Settled(ordered, frozenset(d for d in ordered if d not in stored), pick, note, by)

    def _claim_or_adopt(self, digests: Sequence[str], choose: Choose) -> Settled | bool:
        """Claim the key before measuring it, where claims are wanted (waiting at most
        `KERNELPICK_WAIT_TIMEOUT`, then tuning unclaimed). Returns how the tuning ended when another
        process tuned the key meanwhile (its pick is this one's too), else whether to read the store again."""
        claims = self._claims
        if claims is None:
            return False
        started = time.perf_counter()
        timeout = settings.current().wait_timeout_s
        try:
            claim = claims.claim(self.key, 0.0)
            if claim is None:
                self._say(logging.INFO, ": waiting up to %g s for another process that is tuning it", timeout)
                claim = claims.claim(self.key, timeout)
            mark = claims.last(self.key) if claim is not None else None
        except StoreError as error:
            self._go_alone(error)
            return False
        waited = time.perf_counter() - started
        self.phases["wait"] = self.phases.get("wait", 0.0) + waited
        self._stored = None  # read again: what was stored meanwhile (a finished tuning's, for one)
        if claim is None:
            self._say(logging.WARNING, _WAITED_TOO_LONG, timeout)
            return True
        self._claim = claim
        if mark is None or mark == self._mark:
            return True
        results = self.stored(digests)
        if mark.pick is None or mark.pick not in results or not results[mark.pick].ok:
            return True  # it picked nothing this tuning can run: measure what is left, holding the key
        self._claim = None
        claim.release()
        self._say(logging.INFO, ": running the pick of another process, which tuned it meanwhile")
        return self._settled(digests, results, results, choose, lambda _: (mark.pick, "another process"))

    def _settle_as_rank(
        self,
        job: RankJob,
        digests: Sequence[str],
        measure: _Measured,
        choose: Choose,
        describe: Callable[[str], Mapping[str, Any]],
        divisible: bool,
    ) -> Settled:
        """`settle` as a rank of `job`: take parts of the candidates while some are left, measure and
        publish them, wait for the others' parts, and run the pick the first rank with all decided."""
        stored = self.stored(digests)
        share = KeyShare(
            job, self.key.digest, digests, max(1, min(job.world, len(digests))) if divisible else 1
        )
        results: dict[str, BenchmarkResult] = {}
        taken: set[int] = set()
        top = settings.current().confirm_top
        # Each part's second round re-times its share of the finalists (at least two, the fewest that
        # make a round): the job's second round then costs what one rank's alone would.
        part_top = top if top < 2 else max(2, -(-top // len(share.parts)))
        with self.measuring(describe) as store_one:

            def on_done(digest: str, result: BenchmarkResult) -> None:
                store_one(digest, result)
                if result.ok:  # the other ranks' first rounds cut slow candidates against it too
                    share.offer(result.cost_ms)

            def take(index: int) -> None:
                have, todo = self.split(share.parts[index])
                share.offer(min((r.cost_ms for r in have.values() if r.ok), default=inf))
                with settings.override(confirm_top=part_top):
                    found = dict(measure(todo, have, on_done, share.lowest_elsewhere)) if todo else {}
                results.update(share.publish(index, {**have, **found}))
                taken.add(index)

            try:
                while (index := share.claim()) is not None:
                    take(index)
                deadline = time.monotonic() + settings.current().wait_timeout_s
                for index in [i for i in range(len(share.parts)) if i not in taken]:
                    started = time.perf_counter()
                    found = share.wait(index, deadline)
                    self.phases["wait"] = self.phases.get("wait", 0.0) + time.perf_counter() - started
                    if found is None:
                        self._say(logging.WARNING, _UNPUBLISHED, index, settings.current().wait_timeout_s)
                        take(index)
                    else:
                        results.update(found)

                def decide(pick: str | None) -> tuple[str | None, str]:
                    decided, rank = share.decide(pick)
                    return decided, "" if rank == job.rank else f"rank {rank}"

                return self._settled(digests, results, stored, choose, decide)
            except StoreError as error:  # the rest is measured here, and picked alone
                self._go_alone(error)
                todo = [d for d in digests if d not in results and d not in stored]
                found = dict(measure(todo, {**stored, **results}, on_done, lambda: inf)) if todo else {}
                results = {**stored, **results, **found}
        return self._settled(digests, results, stored, choose)

    def _say(self, level: int, message: str, *args: object) -> None:
        """Log `message` after this tuning's subject and key ("kernel `add` (n=16)")."""
        log.log(level, "%s %s" + message, self.subject, self.described, *args)

    def _go_alone(self, error: StoreError) -> None:
        """Tune without the other processes after `error` (a claim or the job's store failed)."""
        self._claims, self._alone = None, True
        warn_once(log, str(error), "%s; tuning without the other processes meanwhile", error)

    @contextlib.contextmanager
    def measuring(
        self, describe: Callable[[str], Mapping[str, Any]]
    ) -> Iterator[Callable[[str, BenchmarkResult], None]]:
        """Within the block the front measures; it yields the `on_done` that stores each result at
        once, without a pick (`describe(digest)`: the candidate as plain data). SIGTERM ends the block
        as Ctrl-C does: what was measured stays stored, and the next tuning measures only the rest.
        """
        stored: set[str] = set()
        self._describe = describe

        def measured(digest: str, result: BenchmarkResult) -> None:
            self._write([CandidateResult(digest, describe(digest), result)], None)
            if result.storable:
                stored.add(digest)

        with terminable():
            try:
                yield measured
            except (KeyboardInterrupt, Terminated) as interruption:
                count = len(stored)
                kept = f"the {count} results measured are stored" if count else "nothing was measured yet"
                if self.store is None:
                    kept = "nothing is stored (the result store is off)"
                signal = "Ctrl-C" if isinstance(interruption, KeyboardInterrupt) else "SIGTERM"
                self._say(logging.WARNING, _INTERRUPTED, signal, kept)
                raise

    def save(self, results: Mapping[str, BenchmarkResult], fresh: Collection[str], pick: str | None) -> None:
        """Store the results of `fresh` again, as the measurement ended (the closest few timed twice,
        compile seconds known), and `pick` (None: every candidate failed); with nothing measured now,
        only where the key has no pick (a tuning stopped after its last result, before it picked)."""
        rows = [CandidateResult(d, self._describe(d), r) for d, r in results.items() if d in fresh]
        measured = any(row.result.storable for row in rows)
        if measured or pick is None or self.store is None or picked(self.store, self.key) is None:
            self._write(rows, pick)
        claim, self._claim = self._claim, None
        if claim is not None:  # after the save: a process that waited reads the store next
            try:
                claim.finish(Finished.new(pick))
            except StoreError as error:
                self._go_alone(error)

    def _write(self, rows: Sequence[CandidateResult], pick: str | None) -> None:
        """Store `rows` that may be stored (not a search's given-up compile), and `pick`."""
        rows = [row for row in rows if row.result.storable]
        if self.store is None or not (rows or pick):
            return
        started = time.perf_counter()
        self.store.save(self.key, rows, pick=pick)
        self.phases["store_write"] = self.phases.get("store_write", 0.0) + time.perf_counter() - started


def result_store(use: bool, given: ResultStore | None) -> ResultStore | None:
    """The store it was `given`, else the default store; None when `use` (its `cache=`) is False or
    `KERNELPICK_CACHE=0`."""
    if not (use and settings.current().cache):
        return None
    return given if given is not None else default_store()


def pick_against_reference(
    results: Mapping[str, BenchmarkResult],
    reference: str | None,
    *,
    name: Callable[[str], str] = str,
    measure: str = "graph",
) -> Pick[str]:
    """The fastest as `measure` costs a call, unless it does not clearly beat the reference. Without
    one, the best stored result stands in when others were measured beside it now (a new config
    joining a space does not displace the pick on noise)."""
    if reference is None or reference not in results:
        stored = [d for d, r in results.items() if r.ok and r.from_store]
        reference = (
            min(stored, key=lambda d: results[d].cost(measure))
            if stored and len(stored) < len(results)
            else None
        )
    return pick(results, reference, name=name, measure=measure)


_in_graph: contextvars.ContextVar[bool] = contextvars.ContextVar("kernelpick_in_graph", default=False)


def measured_as(values: Collection[object]) -> str:
    """How a selection for a call with `values` ranks its choices (`KERNELPICK_MEASURE`): "graph" (by
    device time) or "eager" (the larger of device and host time per call). When "auto": "graph" in a
    CUDA-graph capture or a compiled graph (`for_graphs`), whose launches cost the host what eager calls
    do not; else "eager"."""
    chosen = settings.current().measure
    if chosen != "auto":
        return chosen
    return "graph" if in_graph() or capturing(values) else "eager"


def in_captures_too(
    call: Callable[..., Any],
    chosen: str,
    results: Mapping[str, BenchmarkResult],
    reference: str | None,
    ranking: str,
    bind: Callable[[str], Callable[..., Any]],
    device_type: str,
) -> Callable[..., Any]:
    """`call` (the pick `ranking` chose), or, on a CUDA device with `KERNELPICK_MEASURE=auto` where the
    other ranking picks another of `results`, a call that runs that one's (`bind(digest)`) inside a
    CUDA-graph capture (device time alone counts there) and `call` outside it."""
    if device_type != "cuda" or settings.current().measure != "auto":
        return call
    other = "graph" if ranking == "eager" else "eager"
    try:
        found = pick_against_reference(results, reference, measure=other).best
        other_call = call if found == chosen else bind(found)
    except Exception:  # nothing else worked, or its kernel no longer loads: `call` serves both
        return call
    if other_call is call:
        return call
    graph_call, eager_call = (other_call, call) if other == "graph" else (call, other_call)
    capturing_now = torch.cuda.is_current_stream_capturing

    def graph_or_eager(*inputs: Any, **kwargs: Any) -> Any:
        return (graph_call if capturing_now() else eager_call)(*inputs, **kwargs)

    return graph_or_eager


def in_graph() -> bool:
    """Whether a selection made now runs in a compiled graph (`for_graphs`)."""
    return _in_graph.get()


@contextlib.contextmanager
def for_graphs() -> Iterator[None]:
    """Selections made inside run in a compiled graph (`measured_as`)."""
    token = _in_graph.set(True)
    try:
        yield
    finally:
        _in_graph.reset(token)

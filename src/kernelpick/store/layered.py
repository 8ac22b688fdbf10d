"""`LayeredStore`: a local result store in front of a shared remote one (Redis), never failing a call."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

from kernelpick.errors import StoreError
from kernelpick.store.base import CandidateResult, ResultStore
from kernelpick.store.base import picked as stored_pick
from kernelpick.store.claims import Claim, Finished
from kernelpick.store.keys import TuningKey
from kernelpick.store.redis import RedisClaims, RedisStore

log = logging.getLogger("kernelpick.store")

#: How long a layered store works on its local store alone after the remote one failed.
RETRY_AFTER_S = 30.0
#: Tuning keys whose saves are kept for the remote store while it fails; past that the oldest go
#: (they stay in the local store, only unshared).
BACKLOG_KEYS = 10_000

_T = TypeVar("_T")
#: A save the remote store has not had: its results by candidate and its pick.
_Kept = tuple[dict[str, CandidateResult], str | None]


class LayeredStore:
    """A local store in front of a shared remote one, behind the `ResultStore` interface.

    Loads read the local store, then the remote one, and copy into the local store the results only
    the remote one had (not its picks: a local store's picks are its tunings'); saves go to both. When the remote store fails (down, unreachable, too slow),
    calls carry on with the local store alone, and the remote one is asked again `retry_after_s`
    later: a shared store never makes a call fail. What was saved meanwhile is kept (the latest per
    key and candidate, for up to `BACKLOG_KEYS` keys) and sent once the remote store answers again,
    so an outage delays sharing but loses nothing of a process that outlives it.

    An outage is warned of once per cause (the error the remote store gave), and only where it
    mattered: a save it could not share, or a load of a key the local store knows nothing of. A
    process whose local store held every result it needed says nothing.
    """

    def __init__(
        self, local: ResultStore, remote: RedisStore, *, retry_after_s: float = RETRY_AFTER_S
    ) -> None:
        self.local = local
        self.remote = remote
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._failing = False
        self._retry_at = 0.0  # time.monotonic() after which a failing remote is asked again
        self._failure: StoreError | None = None  # the remote store's last failure
        self._warned: set[str] = set()  # the causes of failures warned of
        #: Saves the remote store has not had, by key digest: the key, its results by candidate, its pick.
        self._backlog: dict[str, tuple[TuningKey, dict[str, CandidateResult], str | None]] = {}

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        return self._load(key, None)

    def load_candidates(self, key: TuningKey, candidates: Collection[str]) -> dict[str, CandidateResult]:
        """`load` of the caller's own `candidates` only: what the remote store holds of others (a
        candidate another writer added) is neither returned nor copied, nor a pick naming one."""
        return self._load(key, frozenset(candidates))

    def _load(self, key: TuningKey, candidates: frozenset[str] | None) -> dict[str, CandidateResult]:
        found = self.local.load(key)
        if candidates is not None:
            found = {c: stored for c, stored in found.items() if c in candidates}
        # With nothing for the key here, the remote store's answer could have saved a tuning.
        answer = self._ask_remote(lambda: self.remote.load_with_pick(key), mattered=not found)
        if answer is None:
            return found
        shared, _ = answer  # sound rows (RedisStore checks them)
        if candidates is not None:
            shared = {c: stored for c, stored in shared.items() if c in candidates}
        missing = [stored for candidate, stored in shared.items() if candidate not in found]
        if missing:
            # Without the remote store's pick: which candidate a key runs is decided here (a tuning
            # with nothing left to measure picks among the results and saves its pick), never by
            # another writer of the remote store, whose pick may name a candidate this process lacks.
            self.local.save(key, missing)
        return {**shared, **found}

    def picked(self, key: TuningKey) -> str | bool | None:
        """The local store's pick for `key` (a load copies the remote one's there); False when the
        local store cannot say."""
        return stored_pick(self.local, key)

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        results = list(results)
        self.local.save(key, results, pick=pick)
        # Through the backlog, so that a save made as the remote store comes back goes out merged
        # with (and after) what was kept for its key, which would otherwise overwrite it.
        self._keep(key, results, pick)
        self._ask_remote(self._send_kept, mattered=True)

    def claims(self) -> LayeredClaims:
        """Claims through the remote store, shared by every machine using it (`kernelpick.store.claims`)."""
        return LayeredClaims(self, self.remote.claims())

    @property
    def unsent(self) -> int:
        """How many tuning keys have saves the remote store has not had yet."""
        with self._lock:
            return len(self._backlog)

    def _keep(self, key: TuningKey, results: list[CandidateResult], pick: str | None) -> None:
        """Keep a save for the remote store, merged into what is kept for its key."""
        with self._lock:
            self._keep_locked(key, {s.digest: s for s in results}, pick)

    def _keep_locked(self, key: TuningKey, results: dict[str, CandidateResult], pick: str | None) -> None:
        """`_keep` with the lock held: the save goes last (newest), the oldest keys past the cap go."""
        _, kept, kept_pick = self._backlog.pop(key.digest, (key, {}, None))
        merged, merged_pick = _merge((kept, kept_pick), (results, pick))
        self._backlog[key.digest] = (key, merged, merged_pick)
        while len(self._backlog) > BACKLOG_KEYS:
            del self._backlog[next(iter(self._backlog))]

    def _send_kept(self) -> int:
        """Send the kept saves, oldest first; how many were sent.

        Raises:
            StoreError: a save failed; it and those after it stay kept, older than what was saved
                meanwhile (which wins where both have a key).
        """
        with self._lock:
            backlog, self._backlog = list(self._backlog.values()), {}
        for sent, (key, kept, pick) in enumerate(backlog):
            try:
                self.remote.save(key, list(kept.values()), pick=pick)
            except StoreError:
                with self._lock:
                    meanwhile, self._backlog = list(self._backlog.values()), {}
                    for unsent_key, unsent, unsent_pick in backlog[sent:] + meanwhile:
                        self._keep_locked(unsent_key, unsent, unsent_pick)
                raise
        return len(backlog)

    def _ask_remote(self, request: Callable[[], _T], *, mattered: bool) -> _T | None:
        """`request()`'s answer, or None when the remote store is failing; `mattered`: whether
        going without the answer matters to the caller (a failure is then warned of, once per cause).

        A remote store asked again after failing first gets what was kept for it, so that nothing
        reaches it before the older saves do.
        """
        with self._lock:
            skip = self._failing and time.monotonic() < self._retry_at
            retrying = self._failing
        if skip:
            if mattered:
                self._warn()
            return None
        try:
            sent = self._send_kept() if retrying else 0
            answer = request()
        except StoreError as error:
            with self._lock:
                self._failing = True
                self._failure = error
                self._retry_at = time.monotonic() + self.retry_after_s
            log.debug("%s; asking again in %g s", error, self.retry_after_s)
            if mattered:
                self._warn()
            return None
        with self._lock:
            self._failing = False
        if retrying:
            log.info("Redis at %s answers again: results are shared again", self.remote.url)
            if sent:
                log.info("sent %d tunings saved while Redis at %s was away", sent, self.remote.url)
        return answer

    def _warn(self) -> None:
        """Warn of the remote store's last failure, unless its cause was warned of already."""
        with self._lock:
            error = self._failure
            if error is None or _cause(error) in self._warned:
                return
            self._warned.add(_cause(error))
        log.warning(
            "%s; carrying on with the local store alone, asking Redis again in %g s (results saved meanwhile "
            "are sent once it answers)",
            error,
            self.retry_after_s,
        )


class LayeredClaims:
    """The remote store's claims, asked as the layered store asks it for results: while the remote
    store fails, asking raises at once (the tuning then goes ahead alone), without a request that
    would wait for the server's timeout."""

    def __init__(self, layered: LayeredStore, remote: RedisClaims) -> None:
        self.layered = layered
        self.remote = remote

    def last(self, key: TuningKey) -> Finished | None:
        return self._ask(lambda: self.remote.last(key))

    def claim(self, key: TuningKey, timeout_s: float) -> Claim | None:
        return self._ask(lambda: self.remote.claim(key, timeout_s))

    def _ask(self, request: Callable[[], _T]) -> _T:
        answer = self.layered._ask_remote(lambda: (request(),), mattered=False)
        if answer is None:
            raise StoreError(f"Redis at {self.remote.store.url} is not answering")
        return answer[0]


def _cause(error: StoreError) -> str:
    """What went wrong, without which request met it: the client's error where there is one."""
    cause = error.__cause__
    return str(error) if cause is None else f"{type(cause).__name__}: {cause}"


def _merge(older: _Kept, newer: _Kept) -> _Kept:
    """Two saves of one key the remote store missed, as one: the newer's results and pick win."""
    (results, pick), (newer_results, newer_pick) = older, newer
    return {**results, **newer_results}, newer_pick if newer_pick is not None else pick

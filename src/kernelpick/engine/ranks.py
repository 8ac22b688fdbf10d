"""The ranks of a `torch.distributed` job tune together: each key's candidates dealt out, one pick."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import inf
from typing import Any

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.console import warn_once
from kernelpick.errors import StoreError
from kernelpick.store.base import parse_result

log = logging.getLogger("kernelpick.select")

#: Every key kernelpick writes in the job's store starts so; the number is the format of the values.
NAMESPACE = "kernelpick/2/"
#: Seconds between two looks for a value another rank publishes: the first, and the most.
_POLL_MIN_S, _POLL_MAX_S = 0.002, 0.05


@dataclass(frozen=True)
class RankJob:
    """This process's place in a job of several ranks, and the job's store (a `torch.distributed.Store`)."""

    store: Any
    rank: int
    world: int


def rank_job() -> RankJob | None:
    """The job this process is a rank of when `KERNELPICK_RANKS` is on and a process group of two or
    more ranks is initialized; else None."""
    if not settings.current().ranks:
        return None
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    world = dist.get_world_size()
    if world < 2:
        return None
    try:
        # The store `init_process_group` made (TCPStore, FileStore, ...): torch names no public getter.
        store = dist.distributed_c10d._get_default_store()
    except Exception as error:
        message = (
            "the ranks of this job tune alone: kernelpick cannot reach the store of its process group (%s)"
        )
        warn_once(log, "no job store", message, error)
        return None
    return RankJob(dist.distributed_c10d.PrefixStore(NAMESPACE, store), dist.get_rank(), world)


class KeyShare:
    """One key's tuning as the ranks share it through the job's store, under the key's digest, a
    digest of its candidates' list and the number of parts (ranks that list other candidates do not
    mix results). Every method raises StoreError when the job's store fails.

    Args:
        job: the job.
        key: the tuning key's digest.
        digests: every candidate's digest, in the order every rank lists them.
        parts: into how many parts the candidates are dealt (candidate i goes to part i % parts).
    """

    def __init__(self, job: RankJob, key: str, digests: Sequence[str], parts: int) -> None:
        self.job = job
        listing = hashlib.sha256("\n".join(digests).encode()).hexdigest()[:16]
        self.prefix = f"{key}/{listing}/{parts}/"
        self.parts = [list(digests[index::parts]) for index in range(parts)]
        self._untried = [(job.rank + step) % parts for step in range(parts)]  # the parts to try to take
        self._lowest = inf  # the lowest cost this rank offered

    def claim(self) -> int | None:
        """The index of a part now this rank's to measure, None when none is left: its own first
        (part `rank % parts`, whose binaries it compiled and loaded at the last key), then any other."""
        me = str(self.job.rank).encode()
        while self._untried:
            index = self._untried.pop(0)
            taken = self._call(
                "take a part", lambda s, i=index: s.compare_set(f"{self.prefix}taken/{i}", "", me)
            )
            if bytes(taken) == me:
                return index
        return None

    def offer(self, cost_ms: float) -> None:
        """Tell the other ranks' cutoffs (`lowest_elsewhere`) this rank's lowest cost, when `cost_ms`
        lowers it. Best effort: a failing store is the tuning's concern at its next step."""
        if cost_ms < self._lowest:
            self._lowest = cost_ms
            with contextlib.suppress(Exception):
                self.job.store.set(f"{self.prefix}lowest/{self.job.rank}", repr(cost_ms))

    def lowest_elsewhere(self) -> float:
        """The lowest cost another rank offered for this key so far (infinity: none yet)."""
        names = [f"{self.prefix}lowest/{rank}" for rank in range(self.job.world) if rank != self.job.rank]
        try:
            return min(
                (float(self.job.store.get(n)) for n in names if self.job.store.check([n])), default=inf
            )
        except Exception:
            return inf

    def publish(self, index: int, results: Mapping[str, BenchmarkResult]) -> dict[str, BenchmarkResult]:
        """Publish the results of part `index`; returns the part's results as the job has them (those
        of a rank that published the part first, when one did)."""
        entries = {d: {"result": r.to_dict(), "from_store": r.from_store} for d, r in results.items()}
        value = json.dumps({"rank": self.job.rank, "results": entries})
        kept = self._call("publish results", lambda s: s.compare_set(f"{self.prefix}part/{index}", "", value))
        return self._parse_part(index, kept)

    def wait(self, index: int, deadline: float) -> dict[str, BenchmarkResult] | None:
        """The results of part `index` once published, or None when `deadline` (`time.monotonic()`)
        passes first. Polled: the store's timed wait logs from C++ at each timeout, and one wait to
        the deadline would not end on Ctrl-C."""
        name, pause = f"{self.prefix}part/{index}", _POLL_MIN_S
        while not self._call("look for a value", lambda s: s.check([name])):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(pause, left))
            pause = min(2 * pause, _POLL_MAX_S)
        return self._parse_part(index, self._call("read a value", lambda s: s.get(name)))

    def decide(self, pick: str | None) -> tuple[str | None, int]:
        """Decide the key's pick unless a rank did first; returns the pick decided and its rank."""
        value = json.dumps({"rank": self.job.rank, "pick": pick})
        data = _json(self._call("decide a pick", lambda s: s.compare_set(f"{self.prefix}pick", "", value)))
        if not isinstance(data, dict) or not isinstance(data.get("rank"), int):
            raise StoreError(f"the job's store holds something else than a pick under {self.prefix}pick")
        pick = data.get("pick")
        return (pick if isinstance(pick, str) else None), int(data["rank"])

    def _call(self, what: str, request: Any) -> Any:
        try:
            return request(self.job.store)
        except Exception as error:  # torch.distributed's errors (DistError and others) are RuntimeErrors
            raise StoreError(f"the job's store failed to {what}: {type(error).__name__}: {error}") from error

    def _parse_part(self, index: int, raw: Any) -> dict[str, BenchmarkResult]:
        """A published part, checked as a store's rows are: a result not as kernelpick publishes it,
        or of a candidate not in the part, is left out (measured again)."""
        data = _json(raw)
        entries = data.get("results") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            raise StoreError(
                f"the job's store holds something else than results under {self.prefix}part/{index}"
            )
        part = set(self.parts[index])
        found = {}
        for digest, entry in entries.items():
            if digest not in part or not isinstance(entry, dict):
                continue
            try:
                result = parse_result(entry.get("result"))
            except ValueError as error:
                log.warning(
                    "ignoring the result of candidate %s published by another rank: %s", digest[:12], error
                )
                continue
            found[digest] = replace(result, from_store=entry.get("from_store") is True)
        return found


def _json(raw: Any) -> Any:
    try:
        return json.loads(bytes(raw))
    except (TypeError, ValueError, RecursionError):
        return None

"""Results on a Redis server shared by machines (`LayeredStore` keeps a local store in front)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kernelpick import settings
from kernelpick.errors import StoreError
from kernelpick.store.base import CandidateResult, StoredRow, is_number, parse_stored
from kernelpick.store.claims import Finished, wait_until
from kernelpick.store.keys import TuningKey, canonical_json, canonical_value
from kernelpick.store.signing import Signer

log = logging.getLogger("kernelpick.store")

#: Every Redis key kernelpick writes starts so; the number is the format of what is stored under them.
PREFIX = "kernelpick:1:"
#: Largest entry read or written: a result is a few hundred bytes, a larger entry is not kernelpick's.
MAX_ENTRY_BYTES = 64 * 1024

_KEYS = f"{PREFIX}keys"  # hash: key digest -> the key's canonical JSON (what `rows()` lists)
_PICKS = f"{PREFIX}picks"  # hash: key digest -> the digest of the candidate its tuning chose
_ROWS_BATCH = 256  # keys read per round trip by `rows()`
#: Seconds a claim on a key lasts unless its holder renews it (a third of that apart, from a thread
#: of its own): a holder that dies or stops lets go of the key this long after, at most (or
#: `KERNELPICK_WAIT_TIMEOUT` after, when that is shorter).
LEASE_S = 10.0
#: Seconds a finished tuning's mark is kept: far longer than anyone waits for it.
MARK_S = 24 * 3600
#: Take a key unless another holds it: a claim key with no expiry, or one longer than any lease a
#: kernelpick sets (LEASE_S), is no kernelpick claim (a planted one made every tuning of its key wait
#: KERNELPICK_WAIT_TIMEOUT), and goes; one of a holder that stopped renewing expires by itself.
_CLAIM = """
local left = redis.call('pttl', KEYS[1])
if left == -1 or left > tonumber(ARGV[3]) then redis.call('del', KEYS[1]) end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_FINISH = """
redis.call('set', KEYS[2], ARGV[2], 'EX', ARGV[3])
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def _results_key(digest: str) -> str:
    """The hash of one tuning key's results: field = candidate digest, value = an entry (JSON)."""
    return f"{PREFIX}results:{digest}"


class _Malformed(Exception):
    """Something read from Redis is not what kernelpick writes (never leaves this module)."""


class RedisStore:
    """Results on a Redis server (remote only: `LayeredStore` puts a local store in front of it).

    What is stored is JSON and nothing else, each entry checked when read (size, shape, that its
    result parses): a malformed or foreign entry is left out with a warning, never executed. One
    key's results, its pick and its index entry are written in one MULTI/EXEC transaction.

    With a secret (`KERNELPICK_STORE_KEY_FILE`), each entry and pick is signed with it, and only
    those signed with it are read: a writer without it cannot make a tuning pick its timings.
    """

    def __init__(self, url: str, *, timeout_s: float | None = None, key_file: Path | None = None) -> None:
        """Connects lazily: nothing is sent until the first load or save.

        Args:
            url: e.g. `redis://host:6379/0` (also `rediss://`, `unix://`).
            timeout_s: seconds a request may take (default: `KERNELPICK_REDIS_TIMEOUT`).
            key_file: a file holding the secret rows are signed with (default:
                `KERNELPICK_STORE_KEY_FILE`; none: rows are neither signed nor checked for one).

        Raises:
            StoreError: the `redis` package is missing, `url` is not a Redis URL, or the key file
                cannot be read or holds too short a secret.
        """
        key_file = settings.current().store_key_file if key_file is None else key_file
        self._signer = None if key_file is None else Signer.from_file(key_file)
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise StoreError(
                f"a Redis store ({without_password(url)}) needs the redis package, which is not "
                "installed: pip install 'kernelpick[redis]'"
            ) from None
        self.url = without_password(url)
        timeout = settings.current().redis_timeout_s if timeout_s is None else timeout_s
        try:
            self._client = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # No retries: a layered store falls back to its local store at the first failure.
                retry=Retry(NoBackoff(), 0),
            )
        except ValueError as error:
            raise StoreError(
                f"KERNELPICK_REDIS_URL={self.url!r} is not a Redis URL ({error}): expected e.g. "
                "redis://host:6379/0"
            ) from None
        self._failures: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._warned: set[str] = set()
        self._warned_lock = threading.Lock()

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        return self.load_with_pick(key)[0]

    def load_with_pick(self, key: TuningKey) -> tuple[dict[str, CandidateResult], str | None]:
        """Every sound result stored under `key`, by candidate digest, and the key's pick (if any).

        Raises:
            StoreError: the server cannot be reached or did not answer in time.
        """
        found, pick = self._request(
            f"read the results of {key.kernel}",
            lambda pipe: (pipe.hgetall(_results_key(key.digest)), pipe.hget(_PICKS, key.digest)),
            transaction=True,
        )
        results = {
            candidate: stored for candidate, (stored, _) in self._parse_results(key.digest, found).items()
        }
        return results, self._parse_pick(key.digest, pick, results)

    def picked(self, key: TuningKey) -> str | None:
        """The candidate the last finished tuning of `key` picked, if any (one of its sound `ok` results).

        Raises:
            StoreError: the server cannot be reached or did not answer in time.
        """
        return self.load_with_pick(key)[1]

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        """Write `results` (and the pick) under `key` in one MULTI/EXEC transaction: no other client
        sees part of it.

        Raises:
            StoreError: the server cannot be reached, did not answer in time, or refused the write.
        """
        now = time.time()
        entries: dict[str, bytes] = {}
        for stored in results:
            entry = _encode_entry(key.digest, stored, now, self._signer)
            if len(entry) > MAX_ENTRY_BYTES:
                self._warn_once(
                    f"{key.digest}/{stored.digest}",
                    f"not sharing the result of {key.kernel} candidate {stored.digest}: it is "
                    f"{len(entry)} bytes, over the {MAX_ENTRY_BYTES // 1024} KiB limit",
                )
                continue
            entries[stored.digest] = entry
        if not entries and pick is None:
            return

        def write(pipe: Any) -> None:
            if entries:
                pipe.hset(_results_key(key.digest), mapping=entries)
            pipe.hset(_KEYS, key.digest, key.canonical)
            if pick is not None:
                pipe.hset(_PICKS, key.digest, _encode_pick(key.digest, pick, self._signer))

        answers = self._request(f"write the results of {key.kernel}", write, transaction=True)
        refused = [answer for answer in answers if isinstance(answer, Exception)]
        if refused:
            raise StoreError(
                f"Redis at {self.url} refused to write the results of {key.kernel}: {refused[0]}"
            )

    def rows(self, kernel: str | None = None) -> Iterator[StoredRow]:
        """Every sound stored result (or one kernel's), by kernel and key, like `SQLiteStore.rows`;
        malformed entries are left out with a warning.

        Raises:
            StoreError: the server cannot be reached or did not answer in time.
        """
        (index,) = self._request("list the stored keys", lambda pipe: pipe.hgetall(_KEYS))
        if isinstance(index, Exception):
            raise StoreError(f"Redis at {self.url} cannot list the stored keys: {_KEYS}: {index}")
        keys = []
        for field, canonical in index.items():
            try:
                key = _parse_key(_text(field), canonical)
            except _Malformed as problem:
                self._warn_once(
                    f"index/{field!r}", f"ignoring entry {field!r} of Redis hash {_KEYS}: {problem}"
                )
                continue
            if kernel is None or key.kernel == kernel:
                keys.append(key)
        keys.sort(key=lambda k: (k.kernel, k.digest))
        for start in range(0, len(keys), _ROWS_BATCH):
            batch = keys[start : start + _ROWS_BATCH]

            def read(pipe: Any, batch: list[TuningKey] = batch) -> None:
                for key in batch:
                    pipe.hgetall(_results_key(key.digest))
                    pipe.hget(_PICKS, key.digest)

            answers = self._request("read stored results", read)
            for index_in_batch, key in enumerate(batch):
                found, pick = answers[2 * index_in_batch : 2 * index_in_batch + 2]
                results = self._parse_results(key.digest, found)
                picked = self._parse_pick(key.digest, pick, {c: stored for c, (stored, _) in results.items()})
                for candidate in sorted(results):
                    stored, created = results[candidate]
                    yield StoredRow(
                        key, candidate, stored.description, stored.result, created, picked == candidate
                    )

    def claims(self) -> RedisClaims:
        """Claims on keys shared by every process of every machine using this server."""
        return RedisClaims(self)

    def close(self) -> None:
        self._client.close()

    def _request(self, what: str, fill: Callable[[Any], object], *, transaction: bool = False) -> list[Any]:
        """The answers to the commands `fill` queues on a pipeline, a command's error in its place
        (e.g. a key of another type: foreign data, which the caller ignores or refuses).

        Raises:
            StoreError: the server cannot be reached or did not answer in time.
        """
        try:
            pipe = self._client.pipeline(transaction=transaction)
            fill(pipe)
            answers: list[Any] = pipe.execute(raise_on_error=False)
        except self._failures as error:
            raise StoreError(
                f"Redis at {self.url} failed to {what}: {type(error).__name__}: {error}"
            ) from error
        return answers

    def _parse_results(self, digest: str, found: Any) -> dict[str, tuple[CandidateResult, float]]:
        """The sound entries of one key's results hash, with the time each was stored (`found` is
        the hash as read, or the error reading it gave)."""
        if isinstance(found, Exception):
            self._warn_once(digest, f"ignoring Redis key {_results_key(digest)}: {found}")
            return {}
        results: dict[str, tuple[CandidateResult, float]] = {}
        for field, raw in found.items():
            try:
                stored, created = _parse_entry(digest, _text(field), raw, self._signer)
            except _Malformed as problem:
                self._warn_once(
                    f"{digest}/{field!r}",
                    f"ignoring field {field[:64]!r} of Redis hash {_results_key(digest)}: {problem}",
                )
                continue
            results[stored.digest] = (stored, created)
        return results

    def _parse_pick(self, digest: str, raw: Any, results: Mapping[str, CandidateResult]) -> str | None:
        """A key's pick read back: one of its sound `ok` `results`, else None (with a warning)."""
        if raw is None:
            return None
        try:
            pick, _, signature = _text(raw).partition(" ")
            if self._signer is not None and not self._signer.signed(_pick_data(digest, pick), signature):
                raise _Malformed("it is not signed with the secret of KERNELPICK_STORE_KEY_FILE")
            if pick not in results or not results[pick].result.ok:
                raise _Malformed(f"it names {pick[:64]!r}, which is not one of the key's sound ok results")
        except _Malformed as problem:
            self._warn_once(f"pick/{digest}", f"ignoring field {digest} of Redis hash {_PICKS}: {problem}")
            return None
        return pick

    def _warn_once(self, what: str, message: str) -> None:
        """Warn of a malformed entry once per store, however often it is read."""
        with self._warned_lock:
            if what in self._warned:
                return
            self._warned.add(what)
        log.warning("%s", message)


class RedisClaims:
    """A claim is a Redis key set if absent (SET NX) with an expiry its holder renews; a finished
    tuning's mark is another key. See `kernelpick.store.claims`. A claim key that is none of a
    kernelpick's (no expiry, or a longer one than any holder sets) is taken over at once: a waiter
    waits at most `LEASE_S` for a holder that is gone."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def last(self, key: TuningKey) -> Finished | None:
        (mark,) = self.store._request(
            f"read the tuning mark of {key.kernel}", lambda pipe: pipe.get(_mark_key(key))
        )
        return None if isinstance(mark, Exception) else Finished.parse(mark)

    def claim(self, key: TuningKey, timeout_s: float) -> RedisClaim | None:
        token = secrets.token_hex(8)
        # A waiter gives up after KERNELPICK_WAIT_TIMEOUT: a lease no longer than that lets a
        # waiter take over from a holder that died before then.
        lease_ms = int(1000 * max(1.0, min(LEASE_S, settings.current().wait_timeout_s)))

        longest_ms = int(1000 * LEASE_S)

        def taken() -> bool:
            (answer,) = self.store._request(
                f"claim {key.kernel}",
                lambda pipe: pipe.eval(_CLAIM, 1, _lock_key(key), token, lease_ms, longest_ms),
            )
            if isinstance(answer, Exception):  # a key of another type there: foreign data
                raise StoreError(f"Redis at {self.store.url} refused to claim {key.kernel}: {answer}")
            return bool(answer == 1)

        if not wait_until(time.monotonic() + timeout_s, taken):
            return None
        return RedisClaim(self.store, key, token, lease_ms)


class RedisClaim:
    """A key held in Redis, its expiry renewed by a thread until it is let go."""

    def __init__(self, store: RedisStore, key: TuningKey, token: str, lease_ms: int) -> None:
        self.store = store
        self.key = key
        self.token = token
        self.lease_ms = lease_ms
        self._done = threading.Event()
        self._renewing = threading.Thread(target=self._renew, name="kernelpick-claim", daemon=True)
        self._renewing.start()

    def _renew(self) -> None:
        while not self._done.wait(self.lease_ms / 3000):
            try:
                self._script(_RENEW, [_lock_key(self.key)], [self.token, self.lease_ms])
            except StoreError as error:  # the claim lapses if this goes on: another process tunes too
                log.debug("cannot renew the claim on %s: %s", self.key.kernel, error)

    def finish(self, mark: Finished) -> None:
        self._done.set()
        self._script(
            _FINISH, [_lock_key(self.key), _mark_key(self.key)], [self.token, mark.to_json(), MARK_S]
        )

    def release(self) -> None:
        self._done.set()
        try:
            self._script(_RELEASE, [_lock_key(self.key)], [self.token])
        except StoreError as error:  # it expires by itself
            log.debug("cannot let go of the claim on %s: %s", self.key.kernel, error)

    def _script(self, script: str, keys: list[str], args: list[object]) -> None:
        (answer,) = self.store._request(
            f"update the claim on {self.key.kernel}", lambda pipe: pipe.eval(script, len(keys), *keys, *args)
        )
        if isinstance(answer, Exception):
            raise StoreError(f"Redis at {self.store.url} refused to update a claim: {answer}")


def _lock_key(key: TuningKey) -> str:
    return f"{PREFIX}claim:{key.digest}"


def _mark_key(key: TuningKey) -> str:
    return f"{PREFIX}tuned:{key.digest}"


#: The fields of a results-hash entry (and a signed one's "signature").
_ENTRY_FIELDS = ("candidate", "description", "result", "created")


def _encode_entry(digest: str, stored: CandidateResult, created: float, signer: Signer | None) -> bytes:
    entry = {
        "candidate": stored.digest,
        "description": canonical_value(dict(stored.description)),
        "result": stored.result.to_dict(),
        "created": created,
    }
    if signer is not None:
        entry["signature"] = signer.sign(_signed_entry(digest, entry))
    return canonical_json(entry).encode()


def _signed_entry(digest: str, entry: dict[str, Any]) -> dict[str, Any]:
    """What an entry's signature covers: its fields and the key it is filed under (a row signed for
    one key does not pass for another's)."""
    return {"key": digest, **{name: entry.get(name) for name in _ENTRY_FIELDS}}


def _encode_pick(digest: str, pick: str, signer: Signer | None) -> str:
    """A key's pick as stored: the candidate's digest, then its signature after a space where signed."""
    return pick if signer is None else f"{pick} {signer.sign(_pick_data(digest, pick))}"


def _pick_data(digest: str, pick: str) -> dict[str, str]:
    return {"key": digest, "pick": pick}


def _parse_entry(
    digest: str, candidate: str, raw: Any, signer: Signer | None
) -> tuple[CandidateResult, float]:
    """A results-hash entry of key `digest` read back, checked field by field (and its signature,
    with a `signer`).

    Raises:
        _Malformed: it is not an entry kernelpick writes for `candidate`.
    """
    data = _json(raw)
    if not isinstance(data, dict):
        raise _Malformed(f"not a JSON object but {type(data).__name__}")
    if signer is not None and not signer.signed(_signed_entry(digest, data), data.get("signature")):
        raise _Malformed("it is not signed with the secret of KERNELPICK_STORE_KEY_FILE")
    if data.get("candidate") != candidate:
        raise _Malformed(
            f"its candidate {str(data.get('candidate'))[:64]!r} is not the field it is filed under"
        )
    created = data.get("created")
    if not is_number(created):
        raise _Malformed(f"its created time {str(created)[:64]!r} is not a number")
    try:
        return parse_stored(candidate, data.get("description"), data.get("result")), float(created)
    except ValueError as error:
        raise _Malformed(str(error)) from None


def _parse_key(digest: str, canonical: Any) -> TuningKey:
    """An index entry read back: a key's canonical JSON, which must hash to the digest it is filed under."""
    if not isinstance(canonical, bytes) or hashlib.sha256(canonical).hexdigest() != digest:
        raise _Malformed("it is not the canonical JSON of the key its digest names")
    data = _json(canonical)
    try:
        return TuningKey.from_dict(data)
    except ValueError as error:
        raise _Malformed(str(error)) from None


def _json(raw: Any) -> Any:
    if not isinstance(raw, bytes):
        raise _Malformed(f"not bytes but {type(raw).__name__}")
    if len(raw) > MAX_ENTRY_BYTES:
        raise _Malformed(f"{len(raw)} bytes, over the {MAX_ENTRY_BYTES // 1024} KiB limit")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise _Malformed(f"not JSON ({str(error)[:100]})") from None


def _text(raw: Any) -> str:
    """A hash field or pick: short UTF-8 text."""
    if not isinstance(raw, bytes) or len(raw) > 256:
        raise _Malformed(f"{str(raw)[:64]!r} is not a digest")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise _Malformed(f"{raw[:64]!r} is not UTF-8 text") from None


def without_password(url: str) -> str:
    """`url` fit for a log line: what comes before the host (a user and password) is ***, and so
    is a `password=` in its query (redis-py takes one there too)."""
    url = re.sub(r"//[^/]*@", "//***@", url, count=1)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)

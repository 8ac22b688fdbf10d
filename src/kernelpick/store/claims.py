"""Claims on tuning keys: processes that need one key at once agree on one tuner, the others wait."""

from __future__ import annotations

import errno
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from filelock import BaseFileLock, FileLock, Timeout

from kernelpick.errors import StoreError
from kernelpick.files import read_regular, replace_whole
from kernelpick.store.keys import TuningKey

log = logging.getLogger("kernelpick.store")

#: Seconds between two looks at a claim held by another process.
POLL_S = 0.05
#: Most bytes of a mark file read: a mark is a token and a digest.
_MARK_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Finished:
    """The mark a finished tuning of a key leaves: a token of its own (no two tunings share one) and
    the candidate it picked (None: every candidate failed)."""

    token: str
    pick: str | None

    @staticmethod
    def new(pick: str | None) -> Finished:
        return Finished(secrets.token_hex(8), pick)

    def to_json(self) -> str:
        return json.dumps({"token": self.token, "pick": self.pick})

    @staticmethod
    def parse(text: str | bytes | None) -> Finished | None:
        """A mark read back; None for none, or for what kernelpick did not write."""
        if text is None:
            return None
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError):  # ValueError: UnicodeDecodeError too
            return None
        if not isinstance(data, dict) or not isinstance(data.get("token"), str):
            return None
        pick = data.get("pick")
        return Finished(data["token"], pick if isinstance(pick, str) else None)


class Claim(Protocol):
    """A key held by this process: it tunes the key, then `finish`es or (interrupted, failed) `release`s."""

    def finish(self, mark: Finished) -> None:
        """Leave `mark` as the key's last finished tuning, then let go.

        Raises:
            StoreError: the mark could not be written (the claim is let go all the same).
        """
        ...

    def release(self) -> None:
        """Let go without a mark: a waiter then tunes the key itself."""
        ...


class Claims(Protocol):
    """Claims on the keys of one store: the SQLite store's `FileClaims` (a lock file per key beside
    its file) or Redis's `RedisClaims` (a key with an expiry); docs/multi-rank.md says how a waiting
    process runs the holder's pick, or tunes the key itself once its wait runs out."""

    def last(self, key: TuningKey) -> Finished | None:
        """The mark of the last finished tuning of `key` that held a claim (None: none).

        Raises:
            StoreError: it cannot be read.
        """
        ...

    def claim(self, key: TuningKey, timeout_s: float) -> Claim | None:
        """Hold `key`, waiting up to `timeout_s` while another process holds it; None when the wait ran out.

        Raises:
            StoreError: it cannot be claimed (the lock's folder or server cannot be used).
        """
        ...


def claims_of(store: object) -> Claims | None:
    """The claims of `store`, or None when it has none (a store in memory, a user's own store)."""
    claims: Callable[[], Claims | None] | None = getattr(store, "claims", None)
    return None if claims is None else claims()


class FileClaims:
    """A lock file per key in `folder`, held with `filelock` (the system lets go of it when its holder
    dies, however it dies), and a mark file beside it, replaced whole when a tuning finishes: one
    small file per key tuned while a claim was wanted.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def last(self, key: TuningKey) -> Finished | None:
        try:
            return Finished.parse(read_regular(self._path(key, "done"), _MARK_BYTES))  # a link's is no mark
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno == errno.ELOOP:
                return None
            raise StoreError(
                f"cannot read the tuning mark of {key.kernel} in {self.folder}: {error}"
            ) from error

    def claim(self, key: TuningKey, timeout_s: float) -> FileClaim | None:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            # 0600: another user who could open a lock file could hold it, and with it the key.
            lock = FileLock(str(self._path(key, "lock")), mode=0o600)
            try:
                lock.acquire(timeout=timeout_s, poll_interval=POLL_S)
            except Timeout:
                return None
        except OSError as error:
            raise StoreError(f"cannot lock {key.kernel} in {self.folder}: {error}") from error
        return FileClaim(lock, self._path(key, "done"))

    def _path(self, key: TuningKey, suffix: str) -> Path:
        return self.folder / f"{key.digest}.{suffix}"


class FileClaim:
    """A key held through its lock file."""

    def __init__(self, lock: BaseFileLock, mark: Path) -> None:
        self._lock = lock
        self._mark = mark

    def finish(self, mark: Finished) -> None:
        try:
            # Whole or not at all: a waiter reads the mark as soon as the lock is let go.
            replace_whole(self._mark, mark.to_json(), f".{self._mark.name}.")
        except OSError as error:
            raise StoreError(f"cannot write the tuning mark {self._mark}: {error}") from error
        finally:
            self.release()

    def release(self) -> None:
        self._lock.release()


def wait_until(deadline: float, ready: Callable[[], bool]) -> bool:
    """Whether `ready()` came true before `deadline` (`time.monotonic()`), asked every `POLL_S`
    seconds at first, then less often (every quarter of a second at most) over a long wait."""
    pause = POLL_S
    while True:
        if ready():
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, 0.25)

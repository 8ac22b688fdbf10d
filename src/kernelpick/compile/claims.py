"""Compile claims: the processes of one host that need one binary at once compile it once."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout
from triton import knobs

from kernelpick.console import warn_once

log = logging.getLogger("kernelpick.compile")

#: The folder of the claims, inside Triton's cache folder (Triton looks only at its hash folders).
CLAIMS_FOLDER = "kernelpick-claims"
#: Seconds between two looks at a claim another process holds.
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ClaimWait:
    """How getting a compile's claim went: held (False: compile all the same) and the seconds spent
    waiting for another process that held it."""

    held: bool
    waited_s: float


def claims_folder() -> Path | None:
    """The folder of this host's compile claims; None when Triton has no cache folder (nothing is
    shared), or when the folder is a link or another user's (`_private`)."""
    folder = knobs.cache.dir
    if not folder:
        return None
    path = Path(folder) / CLAIMS_FOLDER
    try:  # checked here too, where compilers are started: a warning in each of them would repeat
        return path if _private(path) else None
    except OSError:  # an unwritable cache folder: `compile_claim` says so
        return path


def _private(folder: Path) -> bool:
    """Make `folder` where it is missing, private to this user (0700); whether claims may be held in
    it. Another user's folder (or a link planted in its place) could make this user's compiles wait,
    or name where their lock files are made: it is passed over, with one warning.

    Raises:
        OSError: it cannot be made or looked at.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = folder.lstat()
    if stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid():
        if stat.S_IMODE(found.st_mode) & 0o077:  # made by an older kernelpick under the umask
            folder.chmod(0o700)
        return True
    what = "a link" if stat.S_ISLNK(found.st_mode) else "not a folder of this user's"
    message = "compile claims are not held in %s: it is %s; each process compiles on its own"
    warn_once(log, f"claims folder {folder}", message, folder, what)
    return False


@contextmanager
def compile_claim(folder: Path, key: str, wait_s: float) -> Iterator[ClaimWait]:
    """Hold the claim on one compile inside the context.

    Args:
        folder: the claims' folder (`claims_folder`).
        key: Triton's cache key of the compile (what `AsyncCompileMode` knows it by).
        wait_s: how long to wait while another process holds the claim; then the context is
            entered without it (the caller compiles on its own).

    Yields:
        How getting the claim went.
    """
    # Named by the sha256 of Triton's cache key, as Triton names the cache folder of its binary;
    # 0600: another user who could open a lock file could hold the claim.
    lock = FileLock(str(folder / f"{hashlib.sha256(key.encode()).hexdigest()}.lock"), mode=0o600)
    started = time.monotonic()
    held, waited_s = False, 0.0
    try:
        if _private(folder):
            try:
                lock.acquire(timeout=0)
            except Timeout:
                lock.acquire(timeout=wait_s, poll_interval=POLL_S)
                waited_s = time.monotonic() - started
            held = True
    except Timeout:
        log.warning(
            "a config was compiling in another process for over %.0f s; compiling it here as well", wait_s
        )
        waited_s = time.monotonic() - started
    except OSError as error:  # an unwritable cache folder: each process compiles on its own
        log.debug("cannot claim a compile in %s: %s", folder, error)
    try:
        yield ClaimWait(held, waited_s)
    finally:
        if held:
            lock.release()

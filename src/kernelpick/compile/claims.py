"""Compile claims: the processes of one host that need one binary at once compile it once.

Triton's on-disk cache (`TRITON_CACHE_DIR`, default `~/.triton/cache`) already shares binaries
between the processes that use it: a config one process compiled is loaded by the next one that
asks for it. Two that ask at the same moment both compile it, though: the device processes of
`kernelpick tune --devices 0,1,2,3` each meet the same configs of a kernel at about the same time.

So a forked compiler (`kernelpick.compile.precompile`) first holds the compile's claim: a lock file
named by Triton's own cache key of it (the kernel's source and specialization, the options, the
target: one GPU model's binary, whichever GPU of the model asked), in `kernelpick-claims/` inside
Triton's cache folder. A compiler that finds the claim held waits, then finds the binary in
Triton's cache and loads it instead of compiling it again. The system lets go of a lock the moment
its holder dies, however it dies; a holder that hangs is waited for a limited time, then the
waiter compiles the config itself. A claim orders compiles and nothing else: what a process runs
is always what Triton's cache key names, so a claim can cost time, never a wrong binary.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

log = logging.getLogger("kernelpick.compile")

#: The folder of the claims, inside Triton's cache folder (Triton looks only at its hash folders).
CLAIMS_FOLDER = "kernelpick-claims"
#: Seconds between two looks at a claim another process holds.
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ClaimWait:
    """How getting a compile's claim went: whether it is held now (False: the wait ran out, or the
    folder cannot be used: compile all the same), and the seconds spent waiting for another
    process that held it (0.0: nobody held it)."""

    held: bool
    waited_s: float


def claims_folder() -> Path | None:
    """The folder of this host's compile claims, inside Triton's cache folder; None when Triton
    has no cache folder (nothing is shared then, so nothing is claimed)."""
    try:
        from triton import knobs

        folder = knobs.cache.dir
    except Exception:  # an older or stripped Triton: compiles go on unclaimed
        return None
    return Path(folder) / CLAIMS_FOLDER if folder else None


def claim_path(folder: Path, key: str) -> Path:
    """The lock file of a compile: named by the sha256 of Triton's cache key, as Triton names the
    cache folder of its binary."""
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()}.lock"


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
    lock = FileLock(str(claim_path(folder, key)))
    started = time.monotonic()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire(timeout=0)
            waited = False
        except Timeout:
            waited = True
            lock.acquire(timeout=wait_s, poll_interval=POLL_S)
    except Timeout:
        log.warning(
            "a config was compiling in another process for over %.0f s; compiling it here as well",
            wait_s,
        )
        yield ClaimWait(False, time.monotonic() - started)
        return
    except OSError as error:  # an unwritable cache folder: each process compiles on its own
        log.debug("cannot claim a compile in %s: %s", folder, error)
        yield ClaimWait(False, 0.0)
        return
    try:
        yield ClaimWait(True, time.monotonic() - started if waited else 0.0)
    finally:
        lock.release()

"""Files others may share or tamper with: written whole, read without following links, appended by line."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

#: Opening for reading neither follows a link (what one planted there names is not ours) nor waits
#: on a pipe someone put in a file's place.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file at `path`, or None where it is anything else (a pipe, a device)
    or larger than `limit` bytes.

    Raises:
        OSError: there is no such file, it is a link (ELOOP) or cannot be read.
    """
    with os.fdopen(os.open(path, _READ_FLAGS), "rb") as stream:
        facts = os.fstat(stream.fileno())
        if not stat.S_ISREG(facts.st_mode) or facts.st_size > limit:
            return None
        data = stream.read(limit + 1)
    return data if len(data) <= limit else None


def replace_whole(path: Path, text: str, prefix: str) -> None:
    """Write `text` to `path` whole or not at all (a reader never sees half a file), through a file
    named `prefix` and what no one can foresee (a link planted at a foreseen name would be followed),
    private to the user (0600). What `path` held, a file, a link or a pipe, is replaced.

    Raises:
        OSError: it cannot be written.
    """
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def lock_exclusively(descriptor: int) -> None:
    """Hold an exclusive `flock` on the open file until it is closed (nothing where the system has
    none: Windows, where O_APPEND alone keeps a line whole)."""
    with contextlib.suppress(ImportError):
        import fcntl

        fcntl.flock(descriptor, fcntl.LOCK_EX)


def write_all(descriptor: int, data: bytes) -> None:
    """Write every byte of `data` (a single `os.write` may write fewer)."""
    written = 0
    while written < len(data):
        written += os.write(descriptor, data[written:])


def append_line(path: Path, line: str) -> None:
    """Append `line` and a newline to `path`, creating it: with O_APPEND, under `flock` where there is
    one, so that lines of threads and processes appending at once never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        lock_exclusively(descriptor)
        write_all(descriptor, (line.rstrip("\n") + "\n").encode())
    finally:
        os.close(descriptor)  # closing releases the lock

"""Which function a kept kernel source came from, so that a kernel's superseded sources are found."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpick.files import read_regular, replace_whole
from kernelpick.store.keys import TuningKey

#: Most bytes of an origins file read: a few paths.
MAX_ORIGINS_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True, order=True)
class Origin:
    """Where a kernel is defined: its file (absolute) and the function's qualified name."""

    file: str
    function: str


def origin_of(kernel: Any) -> Origin | None:
    """Where a `triton.jit` kernel is defined, or None when its function does not say."""
    function = getattr(kernel, "fn", kernel)
    file = getattr(getattr(function, "__code__", None), "co_filename", None)
    name = getattr(function, "__qualname__", None)
    if not isinstance(file, str) or not isinstance(name, str):
        return None
    return Origin(file if file.startswith("<") else os.path.abspath(file), name)


def cache_key_of(source: str) -> str | None:
    """The Triton cache key in an autotuned kernel's key source (`measure-N:<cache key>`); None for
    another source (a selector's key names versions only)."""
    version, colon, cache_key = source.partition(":")
    return cache_key if colon and cache_key and version.startswith("measure-") else None


def origins_path(cache: Path, cache_key: str) -> Path:
    """The file of the origins of the kernel source with this cache key, in the cache folder `cache`."""
    return cache / "kernels" / "origins" / f"{hashlib.sha256(cache_key.encode()).hexdigest()[:40]}.json"


def note_origin(cache: Path, kernel: Any) -> None:
    """Note where `kernel` (a `triton.jit` function being tuned) is defined, beside its kept source.

    Raises:
        OSError: the file cannot be written.
    """
    origin, cache_key = origin_of(kernel), getattr(kernel, "cache_key", None)
    if origin is None or not isinstance(cache_key, str):
        return
    path = origins_path(cache, cache_key)
    known = read_origins(path)
    if origin in known:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps([{"file": o.file, "function": o.function} for o in sorted(known | {origin})])
    replace_whole(path, text, ".origins-")  # as the kept sources are


def read_origins(path: Path) -> frozenset[Origin]:
    """The origins noted in the file at `path`: none where there is no such file, or it holds anything
    but what `note_origin` writes (it is read as data, without following a link)."""
    try:
        data = json.loads(read_regular(path, MAX_ORIGINS_BYTES) or b"")
    except (OSError, ValueError, RecursionError):  # none, a link, unreadable, too large; not JSON
        return frozenset()
    if not isinstance(data, list):
        return frozenset()
    return frozenset(
        Origin(item["file"], item["function"])
        for item in data
        if isinstance(item, dict)
        and isinstance(item.get("file"), str)
        and isinstance(item.get("function"), str)
    )


def superseded_sources(rows: Iterable[tuple[TuningKey, float]], cache: Path) -> frozenset[tuple[str, str]]:
    """The (kernel, source) pairs among `rows` (each row's key and when it was stored) whose source is
    superseded, by the origins noted in the cache folder `cache`.

    A source is superseded when it has an origin noted, and each of its origins has since been tuned
    with another source of the same kernel name: some row of that source was stored later than every
    row of this one. A source with no origin noted (tuned before kernelpick noted them, with another
    cache folder, or a selector's key, whose sources are versions) never is.
    """
    newest: dict[tuple[str, str], float] = {}
    for key, created in rows:
        pair = (key.kernel, key.source)
        newest[pair] = max(created, newest.get(pair, created))
    origins: dict[tuple[str, str], frozenset[Origin]] = {}
    for kernel, source in newest:
        cache_key = cache_key_of(source)
        if cache_key is not None:
            origins[kernel, source] = read_origins(origins_path(cache, cache_key))
    latest: dict[tuple[str, Origin], float] = {}  # when each kernel name's function was last tuned
    for (kernel, source), found in origins.items():
        for origin in found:
            latest[kernel, origin] = max(newest[kernel, source], latest.get((kernel, origin), 0.0))
    return frozenset(
        pair
        for pair, found in origins.items()
        if found and all(latest[pair[0], origin] > newest[pair] for origin in found)
    )

"""Kernels on disk: rendered modules by content hash, and the sources of hand-written kernels tuned."""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import logging
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpick import settings
from kernelpick.console import warn_once
from kernelpick.errors import TemplateError
from kernelpick.files import read_regular, replace_whole
from kernelpick.store.origins import note_origin
from kernelpick.workers.values import RENDERED_PREFIX

log = logging.getLogger("kernelpick.select")

_loaded: dict[Path, ModuleType] = {}
#: The modules this process rendered, by resolved path: the source each must hold.
_rendered: dict[Path, str] = {}
_lock = threading.Lock()
#: How `write_module` names a module: the first 40 hex digits of its `source_hash`.
_HASH_NAME = re.compile(r"[0-9a-f]{40}")
_HEX = re.compile(r"[0-9a-f]{1,40}")
#: Larger files are not read back: a rendered kernel is a few kB.
MAX_MODULE_BYTES = 4 * 2**20


def source_hash(source: str) -> str:
    """The content hash that names a rendered module."""
    return hashlib.sha256(source.encode()).hexdigest()


def write_module(source: str) -> Path:
    """Write `source` to `<cache dir>/templates/<hash>.py` (a temporary folder when the cache dir
    cannot be used) unless it holds it already; `load_module` of the path imports `source` whatever
    the file holds by then."""
    path = kept_file("templates", source_hash(source), settings.cache_dir_or_temporary())
    resolved = path.resolve()
    if _rendered.get(resolved) != source:  # one item read or set at a time: atomic, no lock needed
        _write(path, source)
        _rendered[resolved] = source
    return path


def kept_file(folder: str, digest: str, cache: Path | None = None) -> Path:
    """`<cache>/<folder>/<digest's first 40 hex digits>.py`: a rendered module ("templates", its
    `source_hash`) or a kernel's source ("kernels", its `cache_key`); `cache` defaults to the cache dir.

    Raises:
        ValueError: `digest`'s first 40 characters are not all hex digits (a name read from a store
            may hold `../`).
    """
    name = digest[:40]
    if not _HEX.fullmatch(name):
        raise ValueError(f"{digest[:64]!r} is not a hash: it names no file kernelpick keeps")
    return (settings.cache_dir() if cache is None else cache) / folder / f"{name}.py"


def keep_kernel_source(kernel: Any) -> Path | None:
    """Keep a `triton.jit` kernel's source under `<cache dir>/kernels` for `kernelpick code`; None when
    Triton has no source for it or the cache dir cannot be used (`settings.usable_cache_dir` warns)."""
    lines = getattr(kernel, "raw_src", None)
    text = "".join(lines) if isinstance(lines, list) else getattr(kernel, "src", None)
    if not isinstance(text, str):
        return None
    folder = settings.usable_cache_dir()
    if folder is None:
        return None
    try:
        path = kept_file("kernels", kernel.cache_key, folder)
    except ValueError:  # not a finished hash (Triton's placeholder while it hashes a recursive kernel)
        return None
    try:
        kept = _write(path, text)
        note_origin(folder, kernel)  # which function it is: `kernelpick cache` tells its old sources
        return kept
    except OSError as error:  # a copy for `kernelpick code` must not fail the tuning that keeps it
        message = "kernelpick cannot keep kernel sources in %s (%s): `kernelpick code` will not show them"
        warn_once(log, f"kernel sources in {path.parent}", message, path.parent, error)
        return None


def _write(path: Path, text: str) -> Path:
    """Write `text` to `path` unless it holds it already (whole: `replace_whole`), its folder made
    private where this creates it."""
    if _read_regular(path) != text:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_whole(path, text, ".render-")
    return path


def _read_regular(path: Path) -> str | None:
    """The text of the regular file at `path`, or None when there is none (or it is a link, a pipe,
    a device, larger than `MAX_MODULE_BYTES` or not UTF-8)."""
    try:
        data = read_regular(path, MAX_MODULE_BYTES)
        return None if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def load_module(path: Path | str) -> ModuleType:
    """Import a rendered module by path, once per process: a module this process rendered runs the
    source it rendered (a changed file is written again, with a warning); a file named by a content
    hash runs only when its content has that hash; any other file runs as it is.

    Raises:
        TemplateError: the file is missing, is not the module its name says, or does not import; the
            message has the reason.
    """
    path = Path(path).resolve()
    with _lock:
        module = _loaded.get(path)
        if module is not None:
            return module
        source = _checked_source(path)
        name = f"{RENDERED_PREFIX}{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None:
            raise TemplateError(f"no rendered kernel module at {path}: render the template again")
        module = importlib.util.module_from_spec(spec)
        # Triton reads a kernel's source through `inspect`, from `linecache`: the text checked, pinned
        # (no modification time: never read again from the file, which may change after this check).
        linecache.cache[str(path)] = (len(source), None, source.splitlines(keepends=True), str(path))
        sys.modules[name] = module  # Triton and inspect find the source through the module
        try:
            exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
        except Exception as error:
            del sys.modules[name]
            raise TemplateError(
                f"the rendered kernel {path} does not import: {type(error).__name__}: {error}"
            ) from error
        _loaded[path] = module
        return module


def _checked_source(path: Path) -> str:
    """The source `load_module` imports for `path` (it says what raises); called with `_lock` held."""
    rendered = _rendered.get(path)
    found = _read_regular(path)
    if rendered is not None:
        if found != rendered:
            log.warning(
                "the rendered kernel %s changed since this process wrote it: writing it again, and "
                "importing what this process rendered",
                path,
            )
            _write(path, rendered)
        return rendered
    if found is None:
        raise TemplateError(f"no rendered kernel module at {path}: render the template again")
    if _HASH_NAME.fullmatch(path.stem) and not source_hash(found).startswith(path.stem):
        raise TemplateError(
            f"the rendered kernel {path} is not the module its name says (its content has another "
            "hash): not imported; render the template again"
        )
    return found

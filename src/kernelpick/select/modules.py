"""Kernels on disk: rendered ones written to the cache by content hash and imported from there by
path, and the source of each hand-written kernel tuned, kept by its Triton cache key for
`kernelpick code` (read as text, never imported).

Triton reads a kernel's source from its file, and another process (a benchmark worker, a later run)
can load the same kernel from the same path. Files are written atomically, so a reader never sees
half a file, and never rewritten: a path names one content.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpick import settings
from kernelpick.errors import TemplateError
from kernelpick.workers.values import RENDERED_PREFIX

log = logging.getLogger("kernelpick.select")

_loaded: dict[Path, ModuleType] = {}
_unkept: set[Path] = set()  # folders kernel sources could not be written to, warned of once
_lock = threading.Lock()


def source_hash(source: str) -> str:
    """The content hash that names a rendered module."""
    return hashlib.sha256(source.encode()).hexdigest()


def template_path(digest: str, cache: Path | None = None) -> Path:
    """Where the rendered module whose `source_hash` is `digest` is written: `<cache>/templates/`, in
    the cache dir unless `cache` names another (`kernelpick code` reads a store's folder)."""
    return (settings.cache_dir() if cache is None else cache) / "templates" / f"{digest[:40]}.py"


def write_module(source: str) -> Path:
    """Write `source` to `<cache dir>/templates/<hash>.py` (once) and return the path; to a temporary
    folder of this process when the cache dir cannot be used (`settings.cache_dir_or_temporary`)."""
    return _write_once(template_path(source_hash(source), settings.cache_dir_or_temporary()), source)


def kernel_source_path(cache_key: str, cache: Path | None = None) -> Path:
    """Where the source of the Triton kernel with this `JITFunction.cache_key` is kept: `<cache>/kernels/`,
    in the cache dir unless `cache` names another."""
    return (settings.cache_dir() if cache is None else cache) / "kernels" / f"{cache_key[:40]}.py"


def keep_kernel_source(kernel: Any) -> Path | None:
    """Keep a `triton.jit` kernel's source (decorators included) under `<cache dir>/kernels`, named by
    its cache key, for `kernelpick code`; None when Triton has no source for it, or when the cache
    dir cannot be used (`settings.usable_cache_dir` warns once): nothing is kept then, as no store is."""
    lines = getattr(kernel, "raw_src", None)
    text = "".join(lines) if isinstance(lines, list) else getattr(kernel, "src", None)
    if not isinstance(text, str):
        return None
    folder = settings.usable_cache_dir()
    if folder is None:
        return None
    path = kernel_source_path(kernel.cache_key, folder)
    try:
        return _write_once(path, text)
    except OSError as error:  # a copy for `kernelpick code` must not fail the tuning that keeps it
        with _lock:
            first = path.parent not in _unkept
            _unkept.add(path.parent)
        if first:
            log.warning(
                "kernelpick cannot keep kernel sources in %s (%s): `kernelpick code` will not show them",
                path.parent,
                error,
            )
        return None


def _write_once(path: Path, source: str) -> Path:
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".render-", suffix=".py")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(source)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load_module(path: Path | str) -> ModuleType:
    """Import a rendered module by path (once per process).

    Raises:
        TemplateError: the file is missing or does not import; the message has the reason.
    """
    path = Path(path).resolve()
    with _lock:
        module = _loaded.get(path)
        if module is not None:
            return module
        name = f"{RENDERED_PREFIX}{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None or not path.exists():
            raise TemplateError(f"no rendered kernel module at {path}: render the template again")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # Triton and inspect find the source through the module
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            del sys.modules[name]
            raise TemplateError(
                f"the rendered kernel {path} does not import: {type(error).__name__}: {error}"
            ) from error
        _loaded[path] = module
        return module

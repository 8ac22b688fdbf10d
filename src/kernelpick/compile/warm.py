"""Warm Triton's compiler up ahead of the first compile, while the program still sets up."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_warm = False


def warm_up_compiler() -> None:
    """Compute what Triton's first compile in this process computes once (its cache key's parts),
    and import what its first specialization of an argument imports.

    Raises:
        Exception: whatever Triton raises without a usable GPU backend (callers ignore it).
    """
    global _warm
    with _lock:
        if _warm:
            return
        _warm_up()
        _warm = True


def _warm_up() -> None:
    import importlib

    from triton.runtime import jit

    mangle_type = getattr(jit, "mangle_type", None)
    if mangle_type is not None:
        mangle_type(0)
    from triton.compiler.compiler import make_backend
    from triton.runtime import driver

    # Triton 3.6 keeps `triton_key` with the compiler, later releases with the cache.
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        triton_key = getattr(importlib.import_module(module), "triton_key", None)
        if triton_key is not None:
            triton_key()
            break
    make_backend(driver.active.get_current_target()).hash()

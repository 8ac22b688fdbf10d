"""Warm Triton's compiler up ahead of the first compile, while the program still sets up.

Triton's first compile in a process hashes Triton's own files, its shared library included
(hundreds of megabytes), to key its cache, and asks `ptxas` for its version: about a second that
the first tuning would otherwise wait for, serially, before any config starts compiling.
"""

from __future__ import annotations


def warm_up_compiler() -> None:
    """Compute what Triton's first compile in this process computes once (its cache key's parts).

    Raises:
        Exception: whatever Triton raises without a usable GPU backend (callers ignore it).
    """
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # Triton 3.6 keeps it with the compiler
        from triton.compiler.compiler import triton_key  # type: ignore[attr-defined,no-redef]
    from triton.compiler.compiler import make_backend
    from triton.runtime import driver

    triton_key()
    make_backend(driver.active.get_current_target()).hash()

"""Kernels decorated under `TRITON_INTERPRET=1`: the `triton.jit` function Triton would have made."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernelpick.compile.interpreter import Patches

_twins: dict[int, CompilableTwin] = {}  # a twin holds its kernel: no other kernel takes its id
_lock = threading.Lock()


class CompilableTwin(JITFunction[Any]):  # type: ignore[misc]  # Triton is untyped here
    """The `JITFunction` of an interpreted kernel: its helpers, found in its scope, are compilable too."""

    def __init__(self, interpreted: InterpretedFunction[Any]) -> None:
        super().__init__(interpreted.fn, **(getattr(interpreted, "kwargs", None) or {}))
        self.interpreted = interpreted

    def get_capture_scope(self) -> dict[str, Any]:
        # Read at each compilation, as Triton does: a helper defined after the kernel is found.
        return compilable_scope(super().get_capture_scope())

    @property
    def cache_key(self) -> str:
        if self.hash is None:  # the source hash covers the helpers it calls, as for a JITFunction
            self.__globals__ = compilable_scope(self.fn.__globals__)
        key: str = JITFunction.cache_key.fget(self)
        return key


def compilable(kernel: Any) -> Any:
    """`kernel` itself, or the compilable twin of an interpreted kernel (made once per kernel)."""
    if not isinstance(kernel, InterpretedFunction):
        return kernel
    with _lock:
        if id(kernel) not in _twins:
            _twins[id(kernel)] = CompilableTwin(kernel)
        return _twins[id(kernel)]


def compilable_scope(scope: dict[str, Any]) -> dict[str, Any]:
    """`scope` with every interpreted function replaced by its compilable twin."""
    if not any(isinstance(value, InterpretedFunction) for value in scope.values()):
        return scope
    return {name: _twin_or_none(value) or value for name, value in scope.items()}


def _twin_or_none(value: Any) -> CompilableTwin | None:
    """The twin of an interpreted function, or None: for anything else, and for an interpreted function
    Triton could not compile anyway (one without Python source), which stays as it is."""
    if not isinstance(value, InterpretedFunction):
        return None
    try:
        twin: CompilableTwin = compilable(value)
    except (OSError, TypeError, ValueError):
        return None
    return twin


@contextmanager
def compiling(kernel: Any) -> Iterator[None]:
    """While `kernel` is lowered: the interpreted functions of `triton.language` (whose `@jit` helpers,
    `tl.cdiv`, `tl.sum`, ..., are interpreted under TRITON_INTERPRET=1 too) and of the modules in the
    kernel's scope are their compilable twins. The caller holds `launch.language_lock`."""
    if not isinstance(kernel, CompilableTwin):
        yield
        return
    modules = [m for name, m in list(sys.modules.items()) if name.startswith("triton.language")]
    modules += [v for v in kernel.fn.__globals__.values() if isinstance(v, ModuleType)]
    swapped = Patches()
    try:
        for module in dict.fromkeys(modules):
            for name, value in list(vars(module).items()):
                twin = _twin_or_none(value)
                if twin is not None:
                    swapped.set_attr(module, name, twin)
        yield
    finally:
        swapped.restore()

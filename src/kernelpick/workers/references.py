"""How a worker process finds the object it must benchmark: by module import, or by file path.

A reference names a module (or, for objects defined in a `__main__` script, that script's path) and
an attribute path in it, optionally called with plain-data arguments (`kernelpick.ops.gemm:selector`
called with `("mm",)`). Only importable objects can be referenced: one defined inside a function, or
bound to no module-level name, is run in the caller's process instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpick.errors import KernelpickError


class IsolationError(KernelpickError, RuntimeError):
    """Something cannot be benchmarked in a worker process (it is not importable, say)."""


@dataclass(frozen=True, slots=True)
class Reference:
    """`module` (or `path` of a script), the dotted `attribute` in it, and arguments to call it with."""

    module: str
    attribute: str
    path: str | None = None
    call: tuple[Any, ...] | None = None

    def to_data(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "attribute": self.attribute,
            "path": self.path,
            "call": None if self.call is None else list(self.call),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Reference:
        call = data.get("call")
        return cls(data["module"], data["attribute"], data.get("path"), None if call is None else tuple(call))

    def __str__(self) -> str:
        where = self.path or self.module
        return f"{where}:{self.attribute}" + ("" if self.call is None else f"{self.call!r}")


def reference_to(target: Any, module: str | None = None) -> Reference:
    """A reference that resolves to `target` itself in another process.

    Args:
        target: the object (an autotuned kernel, a selector).
        module: where to look for it (default: its `__module__`).

    Raises:
        IsolationError: no module-level name is bound to `target`.
    """
    preset = getattr(target, "importable_as", None)
    if isinstance(preset, Reference):
        return preset
    name = module or getattr(target, "__module__", None)
    loaded = sys.modules.get(name) if isinstance(name, str) else None
    if loaded is None or not isinstance(name, str):
        raise IsolationError(f"{target!r} has no module to be imported from")
    attribute = getattr(target, "__qualname__", None)
    if not (
        isinstance(attribute, str) and "<locals>" not in attribute and _lookup(loaded, attribute) is target
    ):
        attribute = next((key for key, value in vars(loaded).items() if value is target), None)
    if attribute is None:
        raise IsolationError(
            f"{target!r} is bound to no module-level name in {name}, so a worker process cannot import "
            "it: define it at module level (or pass isolate=False)"
        )
    path = None
    if name == "__main__":
        file = getattr(loaded, "__file__", None)
        if file is None:
            raise IsolationError(f"{target!r} lives in an interactive session, which a worker cannot import")
        path = str(Path(file).resolve())
    return Reference(name, attribute, path)


def _lookup(module: Any, attribute: str) -> Any:
    value = module
    for part in attribute.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


_scripts: dict[str, Any] = {}
_scripts_lock = threading.Lock()


def resolve(reference: Reference) -> Any:
    """The object `reference` names, importing its module (or running its script once, as a module).

    Raises:
        IsolationError: the module or attribute is missing.
    """
    if reference.path is not None:
        with _scripts_lock:
            module = _scripts.get(reference.path)
            if module is None:
                # Not as __main__: a script's `if __name__ == "__main__":` block does not run again.
                name = f"kernelpick_script_{len(_scripts)}"
                spec = importlib.util.spec_from_file_location(name, reference.path)
                if spec is None or spec.loader is None:
                    raise IsolationError(f"cannot load {reference.path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
                _scripts[reference.path] = module
    else:
        try:
            module = importlib.import_module(reference.module)
        except ImportError as error:
            raise IsolationError(f"cannot import {reference.module}: {error}") from error
    value = _lookup(module, reference.attribute)
    if value is None:
        raise IsolationError(f"{reference} names nothing: {reference.attribute} is not in the module")
    return value(*reference.call) if reference.call is not None else value

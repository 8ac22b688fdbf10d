"""Functions and kernels as bytes a worker can load: by value, never by importing the user's code."""

from __future__ import annotations

import base64
import io
import linecache
import os
import sys
import sysconfig
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import cloudpickle
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernelpick.errors import IsolationError

#: The attributes that keep a `JITFunction`'s options, each named as its constructor's argument but
#: for a leading "_".
_KERNEL_OPTIONS = (
    "do_not_specialize do_not_specialize_on_alignment debug noinline _repr launch_metadata".split()
)
_lock = threading.Lock()


@cache
def _library_prefixes() -> tuple[str, ...]:
    """Where libraries are installed, as path prefixes: the standard library's folders and every
    folder on the import path that holds installed distributions (`*.dist-info`: site-packages, a
    `pip --target` folder), each as named and resolved."""
    paths = sysconfig.get_paths()
    folders = {Path(paths[name]) for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths}
    on_path = [Path(entry or ".") for entry in sys.path]
    folders |= {f for f in on_path if f.is_dir() and next(f.glob("*.dist-info"), None) is not None}
    return tuple({os.path.join(os.path.abspath(f), "") for f in (*folders, *(f.resolve() for f in folders))})


def is_library(module: types.ModuleType) -> bool:
    """Whether a worker may import `module` by name: kernelpick, a built-in, the standard library, or
    a package installed where distributions are (site-packages, say). Anything else (a script, a test
    module, a folder of the user's on the path) is the user's code, which crosses by value."""
    name = module.__name__
    if name == "__main__" or name.startswith("kernelpick_script_"):
        return False
    top = name.partition(".")[0]
    if top == "kernelpick" or top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True  # a worker runs kernelpick: it imports it, installed or on the path
    file = getattr(module, "__file__", None)
    places = [file] if file else list(getattr(module, "__path__", None) or [])  # a namespace package: folders
    return not places or _installed(tuple(places))  # none: built into the interpreter, or frozen


@cache
def _installed(places: tuple[str, ...]) -> bool:
    """Whether every file or folder of `places` is under a folder libraries are installed in, as named
    or resolved (a path through a link, say); a path is resolved only when its name does not match,
    and once per module's files, since every value sent asks about every module loaded."""
    prefixes = _library_prefixes()
    return all(
        place.startswith(prefixes) or os.path.join(Path(place).resolve(), "").startswith(prefixes)
        for place in places
    )


def _rebuild_kernel(fn: types.FunctionType, options: dict[str, Any], filename: str, lines: list[str]) -> Any:
    """A `JITFunction` again, in the worker: its source lines are registered first, so that Triton
    reads the same source the caller compiled (a notebook cell's, or a file edited since)."""
    # cloudpickle names every function's file "<dynamic-code>"; Triton reads a kernel's source by it.
    fn.__code__ = fn.__code__.replace(co_filename=filename)
    if lines and filename not in linecache.cache:
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    return JITFunction(fn, **options)


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle is untyped
    """cloudpickle, with Triton kernels reduced to their function, options and source."""

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, (JITFunction, InterpretedFunction)):
            return super().reducer_override(obj)
        fn = obj.fn
        module = sys.modules.get(getattr(fn, "__module__", "") or "")
        if module is not None and is_library(module) and getattr(module, fn.__name__, None) is obj:
            return getattr, (module, fn.__name__)  # a library's kernel (Triton's own helpers): by reference
        if isinstance(obj, InterpretedFunction):  # decorated under TRITON_INTERPRET=1: it keeps its options
            options = dict(getattr(obj, "kwargs", None) or {})
        else:
            options = {
                attribute.lstrip("_"): value
                for attribute in _KERNEL_OPTIONS
                if (value := getattr(obj, attribute, None)) is not None
            }
        filename = fn.__code__.co_filename
        return _rebuild_kernel, (fn, options, filename, linecache.getlines(filename))


@contextmanager
def _users_code_by_value() -> Iterator[None]:
    """Within the block, cloudpickle serializes the functions and classes of the user's modules by value."""
    registered = []
    try:
        for name in _user_modules():
            module = sys.modules.get(name)
            if module is not None and name not in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.register_pickle_by_value(module)
                registered.append(module)
        yield
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


_seen: tuple[int, set[str]] = (0, set())
#: The names of template modules kernelpick rendered (`kernelpick.engine.modules`). They hold only
#: kernels, which cross by value as their source (`_Pickler`) without their module registered:
#: registering each for every value sent would slow every value (docs/benchmarks.md has the figure).
RENDERED_PREFIX = "kernelpick_rendered_"


def _user_modules() -> set[str]:
    """The modules loaded now that hold the user's code (not libraries): what is serialized by value.
    Worked out again only when modules were loaded since (a tuning serializes many configs)."""
    global _seen
    count = len(sys.modules)
    if _seen[0] != count:
        _seen = (
            count,
            {
                name
                for name, module in list(sys.modules.items())
                if isinstance(module, types.ModuleType)
                and name != "__main__"
                and not name.startswith(RENDERED_PREFIX)
                and not is_library(module)
            },
        )
    return _seen[1]


def encode(value: Any) -> str:
    """`value` as text a worker can `decode` (for a JSON message), the user's code in it by value.

    Raises:
        IsolationError: it cannot be serialized (it holds a lock, an open file, a CUDA stream...);
            the message names what could not.
    """
    stream = io.BytesIO()
    with _lock, _users_code_by_value():
        try:
            _Pickler(stream, protocol=5).dump(value)
        except Exception as error:
            raise IsolationError(
                f"it cannot be sent to a worker process: {type(error).__name__}: {error}"
            ) from error
    return base64.b64encode(stream.getvalue()).decode("ascii")


def decode(text: str) -> Any:
    """The value `encode` made, in this process."""
    return cloudpickle.loads(base64.b64decode(text))

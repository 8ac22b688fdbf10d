"""What kernelpick adds to Triton's interpreter so that kernels written for GPUs run in it as on a GPU."""

from __future__ import annotations

import functools
import importlib
import linecache
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import triton
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.interpreter import InterpretedFunction

from kernelpick.compile import libdevice
from kernelpick.errors import InterpretationError

_MISSING = object()
_STUBS = "triton.language.extra.libdevice"
_BACKEND = "triton.language.extra.cuda.libdevice"  # the symbols `libdevice.FUNCTIONS` implements


class Patches:
    """Attributes and namespace entries set for a while, put back in reverse order by `restore`. Its
    `set_attr` is the interpreter's patch scope's, so Triton's `_patch_attr` and `_patch_builtin` can
    record into it; a `dict` target is a namespace (a module's globals)."""

    def __init__(self) -> None:
        self._changes: list[tuple[Any, str, Any]] = []

    def set_attr(self, target: Any, name: str, value: Any) -> None:
        if isinstance(target, dict):
            self.update(target, {name: value})
        else:
            self._changes.append((target, name, getattr(target, name, _MISSING)))
            setattr(target, name, value)

    def update(self, namespace: dict[str, Any], values: dict[str, Any]) -> None:
        self._changes.append((namespace, "", {name: namespace.get(name, _MISSING) for name in values}))
        namespace.update(values)

    def restore(self) -> None:
        while self._changes:
            target, name, original = self._changes.pop()
            if isinstance(target, dict):
                target.update(original)
                for missing in [n for n, value in original.items() if value is _MISSING]:
                    del target[missing]
            elif original is _MISSING:
                delattr(target, name)
            else:
                setattr(target, name, original)


class _Launch:
    """The patches of the launch whose `triton.language` patching is in place, and what they were made
    from; the patch scope of the launch's kernel, undoing the interpreter's (`scope`) and its own."""

    def __init__(self) -> None:
        self.patches = Patches()
        self.namespaces: set[int] = set()
        # The modules and classes whose attributes the interpreter's `_patch_lang` replaces, as they were.
        patched = [tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base]
        patched += [tl.condition] if hasattr(tl, "condition") else []
        self.before = [(target, dict(vars(target))) for target in patched]
        self.scope: Any = None  # the interpreter's patch scope of the launch's kernel

    def restore(self) -> None:
        global _launch
        try:
            self.scope.restore()
        finally:
            _launch = None
            # Put back what the interpreter left patched in `triton.language`: a helper run as an
            # `InterpretedFunction` (under TRITON_INTERPRET=1, `tl.sum` among them) patches it and never
            # undoes that, and in a module the kernel's does not name (`tl.core`), nothing else does.
            for target, before in self.before:
                now = vars(target)
                for name in [n for n in now if n not in before and not isinstance(now[n], ModuleType)]:
                    delattr(target, name)
                for name, value in before.items():
                    if now.get(name, _MISSING) is not value:
                        setattr(target, name, value)
            self.patches.restore()

    def patch_namespace(self, namespace: dict[str, Any]) -> None:
        """Builtins and libdevice stubs under other names in `namespace` (a kernel's or helper's globals)."""
        if id(namespace) in self.namespaces:
            return
        self.namespaces.add(id(namespace))
        builder = interpreter.interpreter_builder
        for name, value in list(namespace.items()):
            if isinstance(value, ModuleType):
                continue
            found = _language().get(id(value))
            patched = getattr(found[1], found[2], value) if found is not None and found[0] is value else value
            if patched is not value:  # the interpreter's version (`tl.static_range` included)
                self.patches.set_attr(namespace, name, patched)
            elif _is_stub(value):
                backend = getattr(_backend_libdevice(), value.__name__, None)
                if backend is not None:
                    interpreter._patch_attr(namespace, name, backend, builder, self.patches)
            elif tl.core.is_builtin(value):
                interpreter._patch_attr(namespace, name, value, builder, self.patches)


@functools.cache
def _language() -> dict[int, tuple[Any, ModuleType, str]]:
    """Every object `triton.language` names, by id, with where it is (an alias of one is given what the
    interpreter puts there). Made once, before the first launch patches anything."""
    found: dict[int, tuple[Any, ModuleType, str]] = {}
    for module in (tl, tl.core, tl.math):
        for name, value in vars(module).items():
            if not isinstance(value, ModuleType):
                found.setdefault(id(value), (value, module, name))
    return found


@functools.cache
def _interpreted_libdevice() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The namespaces of libdevice's stub module and the backend's, each with the backend's functions
    under the interpreter's semantics: every launch installs them (any kernel can reach the stubs)."""
    backend = _backend_libdevice()
    if backend is None:
        return []
    stubs = importlib.import_module(_STUBS)
    builder = interpreter.interpreter_builder
    of_backend, of_stubs = _Kept(), _Kept()
    interpreter._patch_builtin(backend, builder, of_backend)
    for name, value in vars(stubs).items():
        if _is_stub(value) and hasattr(backend, name):
            interpreter._patch_attr(stubs, name, getattr(backend, name), builder, of_stubs)
    return [(vars(backend), of_backend), (vars(stubs), of_stubs)]


class _Kept(dict[str, Any]):
    """A patch scope for Triton's `_patch_attr` that keeps what it would set, by name, instead."""

    def set_attr(self, target: Any, name: str, value: Any) -> None:
        self[name] = value


def _is_stub(value: Any) -> bool:
    return callable(value) and getattr(value, "__module__", None) == _STUBS


@functools.cache
def _backend_libdevice() -> ModuleType | None:
    try:
        return importlib.import_module(_BACKEND)
    except ImportError:  # a Triton built without the CUDA backend: libdevice stays unavailable
        return None


def _create_extern_elementwise(
    builder: Any,
    lib_name: str,
    lib_path: str,
    symbol: str,
    arguments: list[Any],
    result_type: Any,
    is_pure: bool,
) -> Any:
    element = result_type.scalar
    data = libdevice.extern_elementwise(
        symbol, [a.data for a in arguments], interpreter._get_np_dtype(element)
    )
    return interpreter.TensorHandle(data, element)


_launch: _Launch | None = None


def _scalar_index(self: Any) -> int:
    # A scalar is a one-element array in the interpreter; NumPy 2.4 refuses int() of one that is
    # not 0-d, as Triton 3.6 makes them: `range(tl.cdiv(K, BLOCK_K))` then fails.
    return int(self.handle.data.reshape(-1)[0]) if self.handle.data.size == 1 else int(self.handle.data)


def extend(patches: Patches) -> None:
    """Replace, recording in `patches`, the interpreter's functions that kernelpick extends
    (docs/design.md, "Kernels in the interpreter"). The outermost `_patch_lang` of a launch starts the
    launch's patches, undone with the interpreter's; nested calls (helpers) patch their own modules."""
    patch, convert = interpreter._patch_lang, interpreter._implicit_cvt
    patch_tensor: Any = getattr(interpreter, "_patch_lang_tensor", None)

    def patch_lang(fn: Any) -> Any:
        global _launch
        if _launch is not None:
            scope = patch(fn)
            _launch.patch_namespace(fn.__globals__)
            return scope
        launch = _launch = _Launch()
        try:
            launch.scope = patch(fn)
            # libdevice's stubs, and the backend's functions (builtins), the interpreter's for this launch.
            builder_type = type(interpreter.interpreter_builder)
            launch.patches.set_attr(builder_type, "create_extern_elementwise", _create_extern_elementwise)
            for namespace, interpreted in _interpreted_libdevice():
                launch.patches.update(namespace, interpreted)
            launch.patch_namespace(fn.__globals__)
        except BaseException:
            _launch = None
            launch.patches.restore()
            raise
        return launch

    def fp32_scalars(argument: Any) -> Any:
        if isinstance(argument, float):
            handle = interpreter.TensorHandle(np.array([argument], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return convert(argument)

    def scalar_index(tensor: Any, scope: Any) -> Any:
        result = patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", _scalar_index)  # restored with the rest of the scope
        return result

    patches.set_attr(interpreter, "_patch_lang", patch_lang)
    patches.set_attr(interpreter, "_implicit_cvt", fp32_scalars)
    if patch_tensor is not None:
        patches.set_attr(interpreter, "_patch_lang_tensor", scalar_index)


def explain(kernel: Callable[..., Any], error: BaseException) -> InterpretationError:
    """The error to raise for `error`, which the interpreter raised running `kernel` (its Python function):
    it names the line of the kernel, or of a helper it called, that was running, and what to do."""
    chain = [error]
    while chain[-1].__cause__ is not None and chain[-1].__cause__ not in chain:
        chain.append(chain[-1].__cause__)
    cause = chain[-1]
    # The interpreter runs rewritten copies of the kernel and its helpers, compiled with their own
    # file and lines: their frames in the tracebacks are the kernel's source lines, outermost first.
    rewritten = {getattr(f, "__code__", None) for f in list(InterpretedFunction.rewritten_fn.values())}
    calls = [
        (frame.f_code.co_name, frame.f_code.co_filename, line)
        for exception in chain
        for frame, line in traceback.walk_tb(exception.__traceback__)
        if frame.f_code in rewritten
    ]
    name = getattr(kernel, "__name__", "?")
    source = ""
    if calls:
        function, filename, line = calls[-1]
        where = f"at {filename}:{line}"
        if function != name:  # the callers, innermost first; a file named once
            callers = [f"line {n}" if f == filename else f"{f}:{n}" for _, f, n in reversed(calls[:-1])]
            where += f" in helper `{function}` (called from {', called from '.join(callers)})"
        source = linecache.getline(filename, line).strip()
        source = source if len(source) <= 80 else source[:77] + "..."
    else:  # before any line of it ran
        filename, line = kernel.__code__.co_filename, kernel.__code__.co_firstlineno
        where = f"(defined at {filename}:{line})"
    reason = " ".join(str(cause).split())
    reason = f"{type(cause).__name__}: {reason}" if reason else type(cause).__name__
    # One line, the reason and what to do first: tuning summaries keep the start of a message.
    message = f"kernel `{name}` failed in Triton {triton.__version__}'s interpreter {where}: {reason}; {_advice(cause)}"
    if source:
        message += f". The line: `{source}`"
    return InterpretationError(message, name, filename, line)


def _advice(cause: BaseException) -> str:
    text = str(cause)
    gpu = "run the kernel on a GPU"
    if isinstance(cause, NotImplementedError):
        if "inline_asm" in text:
            return f"Triton's interpreter cannot run `tl.inline_asm_elementwise`: {gpu}"
        if "libdevice" in text:
            return f"kernelpick interprets libdevice's common math functions only: {gpu}"
        if "extern_elementwise" in text:
            return f"Triton's interpreter cannot run `tl.extern_elementwise` (an external library): {gpu}"
        return f"Triton's interpreter cannot run this line: {gpu}"
    return f"if the kernel runs on a GPU, Triton's interpreter cannot run this line: {gpu}, or write the line another way"

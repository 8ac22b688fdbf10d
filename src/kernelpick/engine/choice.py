"""Choices: the implementations a selector picks between, behind one small protocol."""

from __future__ import annotations

import functools
import hashlib
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import torch

from kernelpick import settings
from kernelpick.bench.inputs import Example
from kernelpick.compile.precompile import CompileJob, CompileOutcome, compile_each
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError


@runtime_checkable
class Choice(Protocol):
    """One implementation at one config, for one input signature."""

    #: A readable name, unique within its selector (a row of the AUTOTUNE table).
    name: str
    #: A hash of everything that makes this choice what it is: stored results are reused only for an equal one.
    digest: str

    def description(self) -> dict[str, Any]:
        """Plain data for the store and reports: kind, name, config, source hash."""
        ...

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        """What compiling it for these inputs takes, or the outcome when there is nothing to compile
        or it failed before compiling (a template that does not render): returned, not raised."""
        ...

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        """The function that runs this choice on inputs of `signature`: `f(*inputs, **kwargs) -> output`."""
        ...


def compiles_without_user_code(choice: Choice) -> bool:
    """Whether compiling `choice` runs none of the user's code, so that it compiles in the caller even
    when measured in workers (a user's `bind` runs there, where a crash or hang is only that choice's)."""
    return bool(getattr(choice, "compiles_without_user_code", False))


def searched_as(choice: Choice) -> tuple[Config, int, str] | None:
    """The config `choice` runs with and the identity and name of its config space, for a search to
    pick among; None for a choice of no config (an extern). From a `searched_as()` method, else from
    the choice's `config` and `space`."""
    method = getattr(choice, "searched_as", None)
    if method is not None:
        return cast("tuple[Config, int, str] | None", method())
    config, space = getattr(choice, "config", None), getattr(choice, "space", None)
    name = getattr(space, "name", None)
    if not isinstance(config, Config) or not isinstance(name, str):
        return None  # a user's choice may give other things these names: it is measured, not searched
    return config, id(space), name


@runtime_checkable
class ChoiceSpace(Protocol):
    """Something that expands into choices for a signature: an extern, a Triton kernel's configs, a template's."""

    name: str

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        """The choices for `signature` (empty when this space does not apply to it)."""
        ...


def short_hash(*parts: str) -> str:
    """A 20-hex-digit sha256 of `parts`."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def qualified_name(fn: Any) -> str:
    """`module.qualname` of a function (what identifies a library kernel in the store)."""
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and callable(inner):
        return (
            f"partial({qualified_name(inner)}, {getattr(fn, 'args', ())!r}, {getattr(fn, 'keywords', {})!r})"
        )
    module = getattr(fn, "__module__", None) or type(fn).__module__
    short = getattr(fn, "__name__", None)
    name = getattr(fn, "__qualname__", None) or short or type(fn).__qualname__
    loaded = sys.modules.get(module)
    if module == "__main__" or module.startswith("kernelpick_script_"):
        # A script's functions: named by the script's path, the same in the script's own process
        # and in a worker that loaded it by path under another module name.
        file = getattr(loaded, "__file__", None)
        if file is not None:
            return f"{Path(file).resolve()}:{name}"
    if short and getattr(loaded, short, None) is fn:
        return f"{module}.{short}"  # e.g. torch.mm, whose __qualname__ is torch's internal class
    return f"{module}.{name}"


def function_identity(fn: Any) -> str:
    """A hash of what a function of the user's is: its qualified name, its code and the plain values
    it closes over or takes as defaults, so that two lambdas of one module, one function made with two
    block sizes (in a closure, or as `lambda x, block=block: ...` in a loop) or one edited since
    differ. Module globals are left out: the ranks of a job read their own `rank` and must agree."""
    target = getattr(fn, "func", fn)  # functools.partial: its arguments are in the qualified name
    parts = [qualified_name(fn)]
    code = getattr(target, "__code__", None)
    if isinstance(code, types.CodeType):
        parts.append(_code_text(code))
    for cell in getattr(target, "__closure__", None) or ():
        try:
            parts.append(_plain(cell.cell_contents))
        except ValueError:  # an empty cell
            parts.append("<empty>")
    defaults = getattr(target, "__defaults__", None)
    keyword_defaults = getattr(target, "__kwdefaults__", None)
    if defaults or keyword_defaults:  # left out when there are none: digests made before stay valid
        parts.append(f"defaults {_plain(defaults)} {_plain(keyword_defaults)}")
    return short_hash(*parts)


def _code_text(code: types.CodeType) -> str:
    constants = [_code_text(c) if isinstance(c, types.CodeType) else _plain(c) for c in code.co_consts]
    return f"{code.co_code.hex()}|{code.co_names}|{constants}"


def _plain(value: Any) -> str:
    """A repr that is the same in every process (no addresses, no set order)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({', '.join(_plain(v) for v in value)})"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}({sorted(_plain(v) for v in value)})"
    if isinstance(value, dict):
        return f"dict({sorted((_plain(k), _plain(v)) for k, v in value.items())})"
    if callable(value):
        return qualified_name(value)
    return type(value).__qualname__


@dataclass(frozen=True)
class PortableChoice:
    """A choice as a worker gets it: the choice (the user's code in it serialized by value), its
    signature, and whether the caller compiled it already (the worker loads it from Triton's cache)."""

    choice: Choice
    signature: Signature
    compiled: bool = False

    @property
    def name(self) -> str:
        return self.choice.name

    def compile_job(self, example: Example, device: Any) -> CompileJob | CompileOutcome | None:
        return None if self.compiled else self.choice.compile_job(example, self.signature)

    def callable(self) -> Callable[..., Any]:
        return self.choice.callable_for(self.signature)

    def on(self, device: DeviceInfo) -> PortableChoice:
        """This choice measured on a worker's own GPU, which it numbers cuda:0 whatever the caller's."""
        return replace(self, signature=replace(self.signature, device=device))


class ExternChoice:
    """A choice that calls `fn` as it is (`kernelpick.extern`): `torch.mm`, another library's kernel,
    any Python function; a choice space of one for `kernelpick.Selector`.

    Args:
        fn: called as `fn(*inputs, **kwargs)` with the selector call's arguments; returns the output.
        name: its name in tables and the store (default: the function's name, e.g. `torch.mm`).
        out: an out-variant, `out(*inputs, out=tensor, **kwargs)`, used when the selector is called
            with `out=`; without one, the output of `fn` is copied into `out`.

    Raises:
        ConfigError: `fn` or `out` is not callable.
    """

    compiles_without_user_code = True  # a library function: nothing to compile

    def __init__(
        self, fn: Callable[..., Any], *, name: str | None = None, out: Callable[..., Any] | None = None
    ):
        if not callable(fn):
            raise ConfigError(f"kernelpick.extern expects a callable, got {type(fn).__name__}: {fn!r}")
        if out is not None and not callable(out):
            raise ConfigError(f"kernelpick.extern(out=...) expects a callable, got {type(out).__name__}")
        self.fn = fn
        self.out = out
        self.qualified = qualified_name(fn)
        short = getattr(fn, "__name__", None)
        if short and (getattr(fn, "__module__", None) or "").split(".")[0] == "torch":
            short = f"torch.{short}"
        self.name = name or short or self.qualified
        # A Python function's code and the values it closes over are part of what it is: a factory's
        # `fast` made for another scale, or a function edited since, is measured and verified again.
        own_code = [function_identity(f) for f in (fn, out) if hasattr(getattr(f, "func", f), "__code__")]
        self.digest = short_hash("extern", self.qualified, self.name, *own_code)

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        return [self]

    def description(self) -> dict[str, Any]:
        return {
            "kind": "extern",
            "name": self.name,
            "callable": self.qualified,
            "out_variant": self.out is not None,
        }

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        return CompileOutcome("ok")

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        if "out" not in signature.named_kwargs:
            return self.fn
        fn, out_variant = self.fn, self.out

        def call_with_out(*inputs: Any, out: Any, **kwargs: Any) -> Any:
            if out_variant is not None:
                out_variant(*inputs, out=out, **kwargs)
            else:
                out.copy_(fn(*inputs, **kwargs))
            return out

        return call_with_out

    def __repr__(self) -> str:
        return f"extern({self.qualified}, name={self.name!r})"


#: `kernelpick.extern(...)`: the public name of a function as a choice (the class documents its arguments).
extern = ExternChoice


ConfigSource = Sequence[Any] | Callable[[Signature], Sequence[Any]]


def configs_for(configs: ConfigSource, signature: Signature) -> list[Any]:
    """The configs of a space for `signature`: the list itself, or what the callable returns for it."""
    return list(configs(signature) if callable(configs) else configs)


def bound_arguments(result: Any, where: str) -> tuple[tuple[Any, ...], Mapping[str, Any], Any]:
    """Split what a `bind` function returned, `(args, output)`, into positional args, keyword args, output."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise ConfigError(
            f"{where}: bind must return (kernel_arguments, output), got {type(result).__name__}; "
            "kernel_arguments is a tuple (by position) or a dict (by name)"
        )
    args, output = result
    if isinstance(args, Mapping):
        return (), args, output
    if isinstance(args, (tuple, list)):
        return tuple(args), {}, output
    raise ConfigError(
        f"{where}: bind returned kernel arguments of type {type(args).__name__}, expected tuple or dict"
    )


def compile_choices(
    choices: Sequence[Choice],
    example: Example,
    signature: Signature,
    *,
    mode: str | None = None,
    workers: int | None = None,
    **options: Any,
) -> list[CompileOutcome]:
    """Compile `choices` for `example`, inputs of `signature`, every Triton kernel among them at once.

    Args:
        mode: "process" or "thread" (default: `KERNELPICK_COMPILE_MODE`).
        workers: how many compile at once (default: `KERNELPICK_COMPILE_WORKERS`).
        options: `compile_each`'s own (`on_ready`, `phases`, `meanwhile`, `timeout_s`, `stop`).

    Returns:
        One outcome per choice, in order; a choice's own failure is its outcome.
    """
    outcomes = compile_each(
        [functools.partial(choice.compile_job, example, signature) for choice in choices],
        interpreter=signature.device.interpreter,
        workers=workers or settings.compile_workers(),
        mode=mode or settings.current().compile_mode,
        **options,
    )
    return [o if o is not None else CompileOutcome("compile_error", "not compiled") for o in outcomes]

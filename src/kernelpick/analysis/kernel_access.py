"""`analyze`: which arguments a Triton kernel reads and writes, from its TTIR, with no GPU."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from triton.compiler.compiler import make_backend
from triton.compiler.errors import CompilationError

from kernelpick.analysis.access import find_accesses
from kernelpick.analysis.functions import convert_module
from kernelpick.compile.launch import unpassable
from kernelpick.compile.target import Specialization, bind_arguments, default_target, specialize
from kernelpick.compile.twins import compilable
from kernelpick.compile.unwrap import Unwrapped, unwrap
from kernelpick.errors import AnalysisError

logger = logging.getLogger("kernelpick.analysis")

Access = Literal["read", "written", "both", "untouched"]

#: The stage of Triton's pipeline analyzed: the TTIR straight from code generation. Triton's TTIR
#: passes (inlining, canonicalization, block-pointer rewriting) cost 0.5-2.5 ms more per kernel and
#: change no answer: every helper is followed through its `tt.call` and block pointers and
#: descriptors are understood as such. Tests check both stages give the same answers.
ANALYZED_STAGE = "source"


@dataclass(frozen=True, slots=True)
class KernelAccess:
    """Which arguments of one kernel specialization are read and written.

    Attributes:
        kernel_name: the kernel's function name.
        arg_names: every argument that is not a `tl.constexpr`, in signature order.
        mutated: the arguments the kernel may write, in signature order. A written `TensorDescriptor`
            is listed under its own argument name.
        read: the arguments the kernel may read (loads, atomics, descriptor loads), in signature order.
        certain: False when the answer had to be conservative; `mutated` and `read` then hold every
            tensor, pointer and descriptor argument beyond what was proven.
        reason: why the answer is not certain (empty when it is).
        writes_elsewhere: why the kernel may write memory that no argument names, through a pointer
            loaded from memory (a table of addresses) or an address made from an integer: copies of
            its arguments do not keep that memory (empty when it writes only through its arguments).
    """

    kernel_name: str
    arg_names: tuple[str, ...]
    mutated: tuple[str, ...]
    read: tuple[str, ...]
    certain: bool
    reason: str = ""
    writes_elsewhere: str = ""
    _lower: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    def access(self, name: str) -> Access:
        """How the kernel uses argument `name`: "read", "written", "both" or "untouched".

        Raises:
            AnalysisError: `name` is not one of `arg_names`.
        """
        if name not in self.arg_names:
            raise AnalysisError(
                f"kernel `{self.kernel_name}` has no argument `{name}`; its arguments are {', '.join(self.arg_names)}"
            )
        written, read = name in self.mutated, name in self.read
        if written and read:
            return "both"
        return "written" if written else "read" if read else "untouched"

    def ttir(self) -> str:
        """The TTIR the answer was computed from, generated again on request (a few milliseconds).

        It is the module as Triton's code generator emits it, before the TTIR passes.

        Raises:
            AnalysisError: no TTIR could be generated for this kernel (see `reason`).
        """
        if self._lower is None:
            raise AnalysisError(f"no TTIR is available for kernel `{self.kernel_name}`: {self.reason}")
        return self._lower()


_cache: dict[Hashable, KernelAccess] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget every memoized answer (after a kernel's source changed in place, or in tests)."""
    with _cache_lock:
        _cache.clear()


def analyze(kernel: Any, *args: Any, **kwargs: Any) -> KernelAccess:
    """Say which arguments `kernel` reads and writes when launched with these arguments.

    The kernel's TTIR is generated for an explicit target (the current GPU, else a recent CUDA
    GPU), so no GPU is needed. The answer is memoized per kernel source and specialization
    (argument types, constexpr values, and Triton's specialization of the integer 1).

    Args:
        kernel: a `triton.jit` function, or a `triton.autotune` / `triton.heuristics` /
            kernelpick tuning wrapper of one (analyzed with the first config's meta-parameters).
        *args: the launch arguments by position; tensors may be real, CPU, meta or fake tensors,
            and `TensorDescriptor` arguments are accepted.
        **kwargs: launch arguments by name, constexprs and compile options (`num_warps`...) included.

    Returns:
        The arguments read and written; `certain` is False when the answer had to be
        conservative, with the reason in `reason`. Once the arguments fit the kernel, every
        failure (Triton's code generation, reading the TTIR, the analysis itself) gives the
        conservative answer, never an exception.

    Raises:
        AnalysisError: `kernel` is not a Triton kernel, or the arguments do not fit its signature
            (missing, unknown or of a type Triton cannot pass).

    Example:
        >>> access = analyze(add_kernel, x, y, out, n, BLOCK=1024)
        >>> access.mutated
        ('out',)
    """
    unwrapped = unwrap(kernel, args, kwargs)
    early = _early_answer(unwrapped)
    if early is not None:
        return early
    jit = compilable(unwrapped.kernel)  # a kernel decorated under TRITON_INTERPRET=1 compiles as its twin
    _check_keywords(jit, unwrapped.kwargs)
    named = bind_arguments(jit, unwrapped.args, unwrapped.kwargs)
    key = _cache_key(jit, named)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    access = _compute(jit, named, ANALYZED_STAGE)
    with _cache_lock:
        return _cache.setdefault(key, access)


def analyze_uncached(
    kernel: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    stage: str = ANALYZED_STAGE,
) -> KernelAccess:
    """`analyze` without the memo, from a chosen stage of Triton's pipeline (for tests and timing).

    Args:
        kernel: as for `analyze`.
        args: positional launch arguments.
        kwargs: keyword launch arguments.
        stage: `"source"` (straight from code generation, what `analyze` uses: every helper is
            still a `tt.call`, block pointers are not rewritten) or `"ttir"` (after Triton's TTIR passes).
    """
    unwrapped = unwrap(kernel, args, kwargs or {})
    early = _early_answer(unwrapped)
    if early is not None:
        return early
    jit = compilable(unwrapped.kernel)
    _check_keywords(jit, unwrapped.kwargs)
    named = bind_arguments(jit, unwrapped.args, unwrapped.kwargs)
    return _compute(jit, named, stage)


def _early_answer(unwrapped: Unwrapped) -> KernelAccess | None:
    """The conservative answer for kernels that cannot be specialized at all, else None."""
    if unwrapped.problem:
        return _conservative_unbound(unwrapped, unwrapped.problem)
    return None


def written_arguments(
    kernel: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """The names of the arguments `kernel` may write: what a tuner must copy before benchmarking.

    Conservative answers include every tensor argument. Cheap after the first call for a
    specialization (a dictionary lookup keyed by argument types and constexpr values).

    Raises:
        AnalysisError: as `analyze`.
    """
    return analyze(kernel, *args, **(kwargs or {})).mutated


def _compute(jit: Any, named: dict[str, Any], stage: str) -> KernelAccess:
    arg_names = _runtime_arg_names(jit)
    pointers = _pointer_arguments(arg_names, named)
    spec = _specialize(jit, named)  # past this point nothing is for the user to fix in the arguments
    failure = _LOWERING  # what the answer says if the step under way raises
    try:
        module = spec.lower(stage)
        failure = "the TTIR could not be read"
        try:
            program = convert_module(module)
        finally:
            del module  # no IR object may outlive the analysis
        failure = "the TTIR's parameters could not be matched to the kernel's arguments"
        param_names = ttir_parameter_names(spec)
        kernel = program.functions.get(program.entry)
        if kernel is None or len(param_names) != len(kernel.params):
            found_count = "no" if kernel is None else len(kernel.params)
            return _conservative(
                jit.__name__,
                arg_names,
                pointers,
                f"the kernel's TTIR has {found_count} parameters where {len(param_names)} were expected",
            )
        failure = "the analysis failed"
        found = find_accesses(program, param_names)
    except Exception as error:  # neither Triton nor a defect of the analysis may break the caller
        if failure == _LOWERING:
            logger.info("kernelpick could not generate TTIR for `%s`: %s", jit.__name__, error)
        else:
            logger.warning("kernelpick's access analysis failed on `%s`", jit.__name__, exc_info=True)
        return _conservative(jit.__name__, arg_names, pointers, f"{failure}: {_describe(error)}")
    written = {param_names[i] for i in found.written}
    read = {param_names[i] for i in found.read}
    if found.write_doubts:
        written |= set(pointers)
    if found.read_doubts:
        read |= set(pointers)
    doubts = list(dict.fromkeys((*found.write_doubts, *found.read_doubts)))
    return KernelAccess(
        kernel_name=jit.__name__,
        arg_names=arg_names,
        mutated=tuple(n for n in arg_names if n in written),
        read=tuple(n for n in arg_names if n in read),
        certain=not doubts,
        reason="; ".join(doubts),
        writes_elsewhere="; ".join(found.writes_elsewhere),
        _lower=lambda: _ttir_text(spec, stage),
    )


#: The reason's opening when Triton's code generation fails (the kernel does not compile for these arguments).
_LOWERING = "Triton could not generate TTIR"


class _UnusedValues:
    """The IR values a Triton type is given to wrap: any index gives None, as counting needs none.

    A type that does more than store the value it is given fails on None, and that failure reaches
    the analysis' error handling rather than a guessed count.
    """

    def __getitem__(self, index: int) -> None:
        return None


def _parameter_count(signature: Any, path: tuple[int, ...], constants: Mapping[tuple[int, ...], Any]) -> int:
    """How many `tt.func` parameters the argument at `path` becomes.

    Asked the way Triton's code generator hands the `tt.func` parameters out to the arguments
    (`ASTFunction.deserialize`): each type's `_unflatten_ir` takes its values from a cursor and
    returns the cursor past them. No IR builder is involved, so no element type (fp8 included)
    can ask it for something.
    """
    if path in constants:
        return 0
    if isinstance(signature, tuple):
        return sum(_parameter_count(s, (*path, i), constants) for i, s in enumerate(signature))
    if signature == "constexpr":
        return 0
    from triton.language import str_to_ty

    _, end = str_to_ty(signature, None)._unflatten_ir(_UnusedValues(), 0)
    return int(end)


def ttir_parameter_names(specialization: Specialization) -> list[str]:
    """The kernel argument name of each parameter of the kernel's `tt.func`, in order.

    Triton drops constexpr arguments from the TTIR signature and expands others into several
    parameters (a host-side `TensorDescriptor` becomes the descriptor plus its shape and strides; a
    tuple becomes its elements). The expansion is asked of Triton's own types, so it follows
    whatever the installed release does.

    Args:
        specialization: the kernel bound to its arguments (from `specialize`).

    Returns:
        One name per TTIR parameter; an argument expanded into several parameters repeats.
    """
    source = specialization.source
    kernel = specialization.kernel
    names: list[str] = []
    for index, name in enumerate(kernel.arg_names):
        if name not in source.signature:
            continue
        count = _parameter_count(source.signature[name], (index,), source.constants)
        names.extend([name] * count)
    return names


def _check_keywords(jit: Any, kwargs: Mapping[str, Any]) -> None:
    """Reject keywords that are neither parameters nor compile options (Triton would reject them at launch)."""
    unknown = [k for k in kwargs if k not in jit.arg_names and k not in _compile_options()]
    if unknown:
        raise AnalysisError(
            f"kernel `{jit.__name__}` has no argument {', '.join(f'`{k}`' for k in unknown)} and that is not a "
            f"compile option either; its arguments are {', '.join(jit.arg_names)}"
        )


def _specialize(jit: Any, named: dict[str, Any]) -> Specialization:
    """Bind for lowering; Triton's own complaints about argument types become `AnalysisError`."""
    try:
        return specialize(jit, (), named)
    except AnalysisError:
        raise
    except Exception as error:
        for name, value in named.items():  # the argument Triton's message does not name
            problem = unpassable(value)
            if problem is not None:
                raise AnalysisError(
                    f"kernel `{jit.__name__}` cannot be specialized: argument `{name}` is {problem}"
                ) from error
        raise AnalysisError(
            f"kernel `{jit.__name__}` cannot be specialized for these arguments ({type(error).__name__}: "
            f"{compiler_message(error)}); pass tensors, TensorDescriptors, ints, floats, bools, None or constexpr values"
        ) from error


@functools.cache
def _compile_options() -> frozenset[str]:
    """The compile options (`num_warps`, ...) the default target's backend accepts as launch keywords."""
    options = make_backend(default_target()).parse_options({})
    return frozenset(f.name for f in dataclasses.fields(options))


def _ttir_text(spec: Specialization, stage: str) -> str:
    module = spec.lower(stage)
    try:
        return str(module)
    finally:
        del module


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(error).__name__


def _describe(error: BaseException) -> str:
    """A failure in a few words: Triton's own message for a compile error, else the exception's type and last line."""
    if isinstance(error, CompilationError):
        return compiler_message(error)
    text = f"{type(error).__name__}: {_first_line(error)}"
    return text if len(text) <= _REASON_LENGTH else text[: _REASON_LENGTH - 3] + "..."


#: The longest failure a reason quotes (a message can hold a whole IR dump).
_REASON_LENGTH = 300


def compiler_message(error: BaseException) -> str:
    """What Triton said, for people: the innermost message of a chain of compile errors (an error in a
    helper is wrapped by one per call site, each only pointing at its call with a `^`), and the source
    line it points at: "arange's range must be a power of 2 (at `return tl.load(x + tl.arange(0, 15))`)".
    """
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    message, where = "", ""
    for link in chain:  # outermost first: the innermost message and location win
        said = " ".join(str(getattr(link, "error_message", None) or "").split())
        message = said or message
        lines = str(link).splitlines()
        for above, line in itertools.pairwise(lines):
            if line.strip() == "^":
                where = above.strip()
    if not message:
        lines = [line.strip() for line in str(chain[-1]).splitlines() if line.strip() not in ("", "^")]
        message = lines[-1] if lines else type(chain[-1]).__name__
    return f"{message} (at `{where}`)" if where else message


def _runtime_arg_names(kernel: Any) -> tuple[str, ...]:
    """Every parameter that is not a `tl.constexpr`, in order."""
    params = getattr(kernel, "params", None)
    if params is not None:
        return tuple(p.name for p in params if not p.is_constexpr)
    signature = inspect.signature(kernel.fn)
    return tuple(p.name for p in signature.parameters.values() if "constexpr" not in str(p.annotation))


def _holds_memory(value: Any) -> bool:
    """Whether Triton passes `value` as (or with) a pointer: tensors, descriptors, objects with `data_ptr`."""
    if isinstance(value, torch.Tensor) or hasattr(value, "data_ptr"):
        return True
    if isinstance(value, tuple):
        return any(_holds_memory(v) for v in value)
    return _is_descriptor(value)


def _is_descriptor(value: Any) -> bool:
    """A host-side tensor descriptor (Triton's `TensorDescriptor` or a variant of it)."""
    return "TensorDescriptor" in type(value).__name__ and isinstance(
        getattr(value, "base", None), torch.Tensor
    )


def _pointer_arguments(arg_names: Iterable[str], named: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(n for n in arg_names if n in named and _holds_memory(named[n]))


def _conservative(
    name: str, arg_names: tuple[str, ...], pointers: tuple[str, ...], reason: str
) -> KernelAccess:
    return KernelAccess(name, arg_names, pointers, pointers, certain=False, reason=reason)


def _conservative_unbound(unwrapped: Unwrapped, reason: str) -> KernelAccess:
    """The conservative answer when the kernel cannot be specialized: every argument holding memory."""
    kernel = unwrapped.kernel
    arg_names = _runtime_arg_names(kernel)
    all_names = list(getattr(kernel, "arg_names", arg_names))
    named = {**dict(zip(all_names, unwrapped.args, strict=False)), **unwrapped.kwargs}
    return _conservative(kernel.__name__, arg_names, _pointer_arguments(arg_names, named), reason)


def _cache_key(jit: Any, named: Mapping[str, Any]) -> Hashable:
    """What decides the TTIR: the kernel's source (with its dependencies), argument types and constexpr values."""
    constexprs = {p.name for p in jit.params if p.is_constexpr}
    params = set(jit.arg_names)
    return (
        jit.cache_key,
        tuple(
            (name, _value_key(value, name in constexprs) if name in params else ("option", _hashable(value)))
            for name, value in named.items()
        ),
    )


def _value_key(value: Any, constexpr: bool) -> Hashable:
    """The part of one argument that can change the kernel's TTIR (Triton's specialization, coarsened)."""
    if constexpr:
        return ("constexpr", _hashable(value))
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype)
    if isinstance(value, bool):
        return ("bool",)
    if isinstance(value, int):
        # Triton specializes the value 1 into a constant and picks i32 / i64 / u64 by range.
        kind = "i32" if -(2**31) <= value < 2**31 else "i64" if -(2**63) <= value < 2**63 else "u64"
        return ("int", kind, value == 1)
    if isinstance(value, float):
        return ("float",)
    if value is None:
        return ("none",)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("symbolic", type(value).__name__)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return ("tuple", tuple(_value_key(v, False) for v in value))
    if _is_descriptor(value):
        return (
            "descriptor",
            type(value).__name__,
            value.base.dtype,
            tuple(getattr(value, "block_shape", ())),
            len(getattr(value, "shape", ())),
            str(getattr(value, "padding", "")),
        )
    if hasattr(value, "data_ptr"):
        return ("pointer", str(getattr(value, "dtype", "")))
    return ("value", type(value).__qualname__, _hashable(value))


def _hashable(value: Any) -> Hashable:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value  # type: ignore[no-any-return]

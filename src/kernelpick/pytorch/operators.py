"""`kernelpick.op`: a function launching Triton kernels, as a PyTorch operator with inferred mutations."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, overload

import torch
from torch._subclasses.functional_tensor import FunctionalTensorMode

from kernelpick import settings
from kernelpick.errors import MutatesArgsError, OperatorError
from kernelpick.pytorch import pending
from kernelpick.pytorch import schema as schemas
from kernelpick.pytorch.compiled import traceable, traced_rule
from kernelpick.pytorch.fast_path import DISPATCH, INTERPRET, route
from kernelpick.pytorch.func_transforms import functionalize_call
from kernelpick.pytorch.inference import (
    Inference,
    certain_or_warn,
    check_declared,
    check_declared_names,
    check_outputs,
    infer_mutations,
)
from kernelpick.pytorch.launch_tracing import Recording, record_call, recording
from kernelpick.pytorch.running import on_cpu, routing_cpu_launches, start_routing, stop_routing, tensors_in
from kernelpick.select.selector import Selector

logger = logging.getLogger("kernelpick.pytorch")

Infer = Literal["infer"]
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_transforms = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)
_grad_enabled = torch.is_grad_enabled
_bump = torch.autograd.graph.increment_version


@overload
def op(
    name: str,
    fn: Callable[..., Any],
    /,
    *,
    mutates_args: Infer | Iterable[str] = ...,
    schema: str | None = ...,
    example_inputs: Sequence[Any] | None = ...,
) -> Operator: ...


@overload
def op(
    name: str,
    fn: None = None,
    /,
    *,
    mutates_args: Infer | Iterable[str] = ...,
    schema: str | None = ...,
    example_inputs: Sequence[Any] | None = ...,
) -> Callable[[Callable[..., Any]], Operator]: ...


def op(
    name: str,
    fn: Callable[..., Any] | None = None,
    /,
    *,
    mutates_args: Infer | Iterable[str] = "infer",
    schema: str | None = None,
    example_inputs: Sequence[Any] | None = None,
) -> Operator | Callable[[Callable[..., Any]], Operator]:
    """Register a function that launches Triton kernels as a PyTorch operator `name` ("namespace::name").

    Used as `@kernelpick.op("mylib::add")` or `kernelpick.op("mylib::add", add)`. The function takes
    and returns tensors (and the other types `torch.library.custom_op` accepts), and launches plain
    `triton.jit`, `triton.autotune`d, `triton.heuristics` or `kernelpick.autotune`d kernels as
    `kernel[grid](...)`, or through `kernelpick.launch` / `kernelpick.functional`. It may call
    `kernelpick.ops` and selectors made operators by `Selector.as_op`, which select when it runs.

    Registration completes at the first call (or here, when `example_inputs` is given): the call is
    replayed on fake tensors with every launch recorded instead of run, each kernel argument is
    traced back to the operator input whose storage it shares (a view of `x` counts as `x`), and
    the access analysis of each launched kernel says which it writes.

    Args:
        name: the operator's name, "namespace::name"; it becomes `torch.ops.namespace.name`.
        fn: the function (when not used as a decorator).
        mutates_args: "infer" (the default) to use the inputs the kernels write, or the names of
            the inputs the function writes, checked against what the kernels write.
        schema: the operator's schema ("(Tensor x, int n) -> Tensor"); default: inferred from the
            function's type annotations. Mutation annotations are added for you.
        example_inputs: arguments to complete registration with now rather than at the first call.

    Returns:
        An `Operator` (or a decorator making one).

    Raises:
        OperatorError: the name or schema is malformed, the annotations cannot give a schema, or `fn`
            is a `Selector` (which becomes an operator with `Selector.as_op`).
        MutatesArgsError: (at registration) an explicit `mutates_args` disagrees with what the kernels
            write; the message names each argument and the kernel that writes it.
    """

    def decorate(function: Callable[..., Any]) -> Operator:
        return Operator(
            name, function, mutates_args=mutates_args, schema=schema, example_inputs=example_inputs
        )

    return decorate if fn is None else decorate(fn)


class Operator:
    """A PyTorch operator backed by a Python function that launches Triton kernels.

    Call it like the function. `torch.ops.<namespace>.<name>` is the same operator once registered.

    Attributes:
        name: "namespace::name".
        fn: the user's function.
    """

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        mutates_args: Infer | Iterable[str] = "infer",
        schema: str | None = None,
        example_inputs: Sequence[Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
            raise OperatorError(f"an operator name looks like 'namespace::name', got {name!r}")
        if isinstance(fn, Selector):  # it reads tensor data: it cannot be recorded on fake tensors
            raise OperatorError(
                f"op `{name}`: kernelpick.op takes a function that launches kernels, got selector "
                f"`{fn.name}`; a selector becomes an operator with selector.as_op({name!r}, fake=...)"
            )
        try:  # each call binds its arguments to the function's parameters
            inspect.signature(fn)
        except (TypeError, ValueError):
            raise OperatorError(
                f"op `{name}`: {schemas.described(fn)} has no Python signature (a builtin?): kernelpick.op "
                "wraps a Python function that launches kernels; write one that calls it, e.g. "
                "def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor: return torch.add(x, y)"
            ) from None
        self.name = name
        self.fn = fn
        self._namespace, self._opname = name.split("::")
        self._base_schema = schemas.base_schema(name, fn, schema)
        self._tensor_parameters = schemas.tensor_parameters(name, self._base_schema)
        self._parameters = schemas.parameter_names(name, self._base_schema)
        self._keyword_only = schemas.keyword_only(name, self._base_schema)
        tensors_by_keyword = [n for n in self._tensor_parameters if n in self._keyword_only]
        if tensors_by_keyword:  # torch.library.custom_op refuses them
            raise OperatorError(
                f"op `{name}`: tensor parameters cannot be keyword-only in a PyTorch custom operator, but "
                f"{', '.join(f'`{n}`' for n in tensors_by_keyword)} are; move them before the `*`"
            )
        self._declared = _declared(name, mutates_args, schemas.declared_mutations(name, self._base_schema))
        self._lock = threading.RLock()
        self._user_fake: Callable[..., Any] | None = None
        self._autograd: tuple[Callable[..., Any], Callable[..., Any] | None] | None = None
        self._definition: Any = None
        self._overload: Any = None
        self._inference: Inference | None = None
        self._mutated: tuple[str, ...] = ()
        self._bump_positions: tuple[tuple[int, str], ...] = ()
        self._fast = False
        self._traced = False  # compiled, its launches go to Inductor (`kernelpick.pytorch.compiled`)
        self._registered = False  # a plain bool: torch.compile guards on it
        self._unchecked = False  # registered from mutates_args alone: checked against the kernels at a call
        self._first_traced_call = _nonstrict(self._dispatch, name)
        functools.update_wrapper(self, fn)
        pending.watch(self._namespace, self._opname, self._why_not_registered)
        if example_inputs is not None:
            self.register(*example_inputs)
        elif self._declared is not None:
            # Declared: registered now, so that importing the module defines the operator (what
            # torch.export.load needs in a new process); checked against its kernels at the first call.
            check_declared_names(name, self._declared, self._tensor_parameters)
            self._unchecked = True
            self._define(
                self._declared, Inference(self._declared, (), (), certain=False, reason="not checked yet")
            )

    # -- the call paths -----------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _is_compiling():
            if self._registered:
                return getattr(getattr(torch.ops, self._namespace), self._opname)(*args, **kwargs)
            boxed = self._first_traced_call(*args, **kwargs)
            return boxed[0] if boxed else None
        if not self._fast or _dispatch_modes() or _function_modes() or _transforms():
            return self._dispatch(*args, **kwargs)
        how = route(args, kwargs, _grad_enabled())
        if how == DISPATCH:
            return self._dispatch(*args, **kwargs)
        if how == INTERPRET:
            previous = start_routing()
            try:
                result = self.fn(*args, **kwargs)
            finally:
                stop_routing(previous)
        else:
            result = self.fn(*args, **kwargs)
        for index, arg_name in self._bump_positions:  # what the dispatcher's ADInplaceOrView step does
            for tensor in tensors_in([args[index] if index < len(args) else kwargs.get(arg_name)]):
                _bump(tensor)
        return result

    def _dispatch(self, *args: Any, **kwargs: Any) -> Any:
        """The call through PyTorch's dispatcher (registering first, if this is the first call)."""
        if not self._registered or self._unchecked:
            self.register(*args, **kwargs)
        if self._mutated and _transforms():
            result = functionalize_call(self._overload, args, kwargs)
            if result is not NotImplemented:
                return result
        return self._overload(*args, **kwargs)

    # -- registration -------------------------------------------------------------------------
    def register(self, *args: Any, **kwargs: Any) -> Operator:
        """Complete registration from these example arguments (nothing runs); a no-op once registered.

        Returns:
            The operator itself.

        Raises:
            OperatorError: the function fails on fake tensors, or returns a view of an input.
            MutatesArgsError: an explicit `mutates_args` disagrees with what the kernels write.
        """
        with self._lock:
            if self._registered and not self._unchecked:
                return self
            arguments = schemas.bind(self.fn, args, kwargs)
            positional = tuple(n for n in arguments if n not in self._keyword_only)
            try:
                recorded = record_call(self.fn, arguments, positional)
            except OperatorError as error:
                if self._declared is None or self._user_fake is None:
                    raise
                # Declared and given a fake: the user knows what cannot be recorded; trust them.
                logger.warning(
                    "op `%s`: mutates_args=%s is not checked: %s", self.name, self._declared, error
                )
                unchecked = Inference(self._declared, (), (), certain=False, reason=f"not recorded: {error}")
                if self._registered:
                    self._checked(unchecked)
                else:
                    self._define(self._declared, unchecked)
                return self
            check_outputs(self.name, recorded)
            # Compiled, its launches go to Inductor where each can and the function writes no input itself.
            self._traced = traceable(recorded.launches) and not recorded.written_by_torch()
            inference = infer_mutations(recorded, self._parameters)
            if self._declared is None:
                certain_or_warn(self.name, inference)
                mutated = inference.mutated
            else:
                check_declared(self.name, self._declared, inference, self._tensor_parameters)
                mutated = self._declared
            if self._registered:
                self._checked(inference)
            else:
                self._define(mutated, inference)
            return self

    def _checked(self, inference: Inference) -> None:
        """An operator registered from its declared `mutates_args` has been checked against its kernels."""
        self._inference = inference
        self._unchecked = False
        self._fast = settings.current().op_fast_path

    def _define(self, mutated: tuple[str, ...], inference: Inference) -> None:
        text = schemas.with_mutations(self.name, self._base_schema, mutated)
        definition = torch.library.custom_op(self.name, mutates_args=mutated, schema=text)(self._run_eagerly)
        definition.register_fake(self._user_fake or self._derived_fake)
        definition.register_torch_dispatch(FunctionalTensorMode, traced_rule(self.fn, lambda: self._traced))
        if self._autograd is not None:
            backward, setup_context = self._autograd
            definition.register_autograd(backward, setup_context=setup_context)
        elif not mutated and text.rsplit("->", 1)[1].strip() != "()":
            # A backward through it says what to do, in one line (PyTorch takes formulas for
            # functional operators only: no input written, something returned).
            definition.register_autograd(self._no_backward)
        positions = {n: i for i, n in enumerate(self._parameters) if n not in self._keyword_only}
        self._bump_positions = tuple((positions.get(n, len(self._parameters)), n) for n in mutated)
        self._definition = definition
        self._overload = getattr(getattr(torch.ops, self._namespace), self._opname).default
        self._inference = inference
        self._mutated = mutated
        self._fast = settings.current().op_fast_path and not self._unchecked
        self._registered = True

    def _no_backward(self, ctx: Any, *grads: Any) -> Any:
        raise OperatorError(
            f"op `{self.name}` has no backward formula: give it one with "
            f"@{self._opname}.register_autograd(backward, setup_context=...) (torch.library's form), or call "
            "it under torch.no_grad() where no gradient flows through it"
        )

    def _run_eagerly(self, *args: Any, **kwargs: Any) -> Any:
        """The operator's kernel for real tensors: the function, with CPU launches sent to the interpreter."""
        if on_cpu(args, kwargs):
            with routing_cpu_launches():
                return self.fn(*args, **kwargs)
        return self.fn(*args, **kwargs)

    def _derived_fake(self, *args: Any, **kwargs: Any) -> Any:
        """The fake implementation: the function on fake tensors, launches recorded and checked, not run."""
        with recording() as launches:
            output = self.fn(*args, **kwargs)
        arguments = schemas.bind(self.fn, args, kwargs)
        seen = infer_mutations(Recording(arguments, tuple(launches), output, {}), self._parameters)
        undeclared = [n for n in seen.mutated if n not in self._mutated]
        if undeclared and seen.certain:
            raise MutatesArgsError(
                f"op `{self.name}` was registered as mutating {self._mutated or 'nothing'}, but with these inputs "
                + "; ".join(seen.why(n) for n in undeclared)
                + ": the inputs it was registered with do not show every write. Pass mutates_args naming "
                "every input any call may write"
            )
        return output

    # -- what torch.library.CustomOpDef offers ------------------------------------------------
    def register_fake(self, fn: Callable[..., Any], /) -> Callable[..., Any]:
        """Use `fn` as the fake (meta) implementation instead of the derived one; usable as a decorator."""
        with self._lock:
            self._user_fake = fn
            if self._definition is not None:
                self._definition.register_fake(fn)
        return fn

    def register_autograd(
        self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """Give the operator a backward formula, exactly as `torch.library.CustomOpDef.register_autograd`."""
        with self._lock:
            self._autograd = (backward, setup_context)
            if self._definition is not None:
                self._definition.register_autograd(backward, setup_context=setup_context)

    # -- facts --------------------------------------------------------------------------------
    @property
    def registered(self) -> bool:
        """Whether the PyTorch operator exists yet (after the first call or `register`)."""
        return self._registered

    @property
    def mutates_args(self) -> tuple[str, ...]:
        """The inputs the operator is registered as writing.

        Raises:
            OperatorError: not registered yet and `mutates_args` was left to inference.
        """
        if self._registered:
            return self._mutated
        if self._declared is not None:
            return self._declared
        raise OperatorError(self._not_yet("its mutated arguments are inferred"))

    @property
    def inference(self) -> Inference:
        """What the recorded call's kernels were found to write, and why (see `Inference`).

        Raises:
            OperatorError: not registered yet.
        """
        if self._inference is None:
            raise OperatorError(self._not_yet("nothing has been recorded"))
        return self._inference

    @property
    def overload(self) -> Any:
        """`torch.ops.<namespace>.<name>.default`, the operator as PyTorch's dispatcher sees it.

        Raises:
            OperatorError: not registered yet.
        """
        if self._overload is None:
            raise OperatorError(self._not_yet("it has no PyTorch operator yet"))
        return self._overload

    @property
    def schema(self) -> str:
        """The schema, with mutation annotations once registered."""
        return str(self._overload._schema) if self._registered else self._base_schema

    def _why_not_registered(self) -> str | None:
        """What `torch.ops.<namespace>.<name>` says before registration (None after it)."""
        if self._registered:
            return None
        return self._not_yet(
            f"torch.ops.{self._namespace}.{self._opname} does not exist yet (registering takes one call's "
            "arguments, to find which inputs the kernels write)"
        )

    def _not_yet(self, what: str) -> str:
        return (
            f"op `{self.name}` is not registered yet, so {what}: call it once, call `.register(*example_args)`, "
            "or pass example_inputs= or mutates_args= to kernelpick.op (then importing its module registers it, "
            "as torch.export.load needs)"
        )

    def __repr__(self) -> str:
        state = f"mutates_args={self._mutated!r}" if self._registered else "not registered yet"
        return f"<kernelpick.op {self.name} ({state})>"


def _declared(name: str, mutates_args: Any, in_schema: tuple[str, ...]) -> tuple[str, ...] | None:
    """The explicit mutations (from `mutates_args` or the schema's annotations), or None to infer them."""
    if isinstance(mutates_args, str):
        if mutates_args != "infer":
            raise OperatorError(
                f"op `{name}`: mutates_args must be 'infer' or a collection of parameter names, got the string "
                f"{mutates_args!r}; write mutates_args=({mutates_args!r},) for one name"
            )
        return in_schema or None
    declared = tuple(dict.fromkeys(mutates_args))
    if in_schema and set(in_schema) != set(declared):
        raise OperatorError(
            f"op `{name}`: the schema marks {in_schema} as written but mutates_args says {declared}; "
            "give one of the two"
        )
    return declared


def _nonstrict(call: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`call` for a first call inside torch.compile: Dynamo records it without tracing into it.

    The call then registers the operator on Dynamo's fake tensors, and AOTAutograd, which does trace
    into it, finds the registered operator.
    """
    import torch._dynamo

    nonstrict_trace = getattr(torch._dynamo, "nonstrict_trace", None)

    def first_call(*args: Any, **kwargs: Any) -> Any:
        result = call(*args, **kwargs)
        return () if result is None else (result,)  # Dynamo takes no None from a nonstrict call

    if nonstrict_trace is None:  # torch < 2.7

        def unsupported(*args: Any, **kwargs: Any) -> Any:
            raise OperatorError(
                f"op `{name}` was first called inside torch.compile, which this torch version cannot register "
                "it from: call it once before compiling, or pass example_inputs= to kernelpick.op"
            )

        return unsupported
    return nonstrict_trace(first_call)  # type: ignore[no-any-return]

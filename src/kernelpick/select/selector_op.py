"""A selection as a PyTorch operator: compiled and exported programs select when they run."""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from kernelpick import settings
from kernelpick.engine.choice import Choice, ChoiceSpace, ExternChoice
from kernelpick.engine.signature import Signature
from kernelpick.engine.tuning import for_graphs, measured_as, pick_against_reference
from kernelpick.errors import KernelpickError, OperatorError
from kernelpick.select.template_choice import TemplateChoice
from kernelpick.tensors import TensorSpec, example_generator, example_tensor

if TYPE_CHECKING:
    from kernelpick.select.selector import Selector

log = logging.getLogger("kernelpick.select")

#: Whether a call is traced, `dynamo_tracing() or dispatch_modes()`, tested inline on the eager path: Dynamo
#: folds the first to True (torch.compile, strict export); every other tracer (non-strict export,
#: AOTAutograd, fake tensors, make_fx) runs under a dispatch mode.
dynamo_tracing = torch.compiler.is_dynamo_compiling
dispatch_modes = torch._C._len_torch_dispatch_stack

# torch.library keeps operator definitions weakly: an operator lives as long as its definition.
_definitions: dict[str, Any] = {}


#: A backward formula: `backward(args, kwargs, output, grad)` gives the gradient of each positional
#: input (None where it needs none), from the forward's inputs, its output and the output's gradient.
Backward = Callable[[tuple[Any, ...], dict[str, Any], Any, Any], tuple[Any, ...]]


def define_operator(
    name: str,
    run: Callable[..., Any],
    *,
    schema: str,
    fake: Callable[..., Any],
    pick: Callable[..., Callable[..., Any] | None],
    backward: Backward | None = None,
) -> torch._ops.OpOverload:
    """Register `run` as the functional PyTorch operator `name` ("namespace::name"): `fake` describes its
    output, `pick(*inputs, **kwargs)` gives what a compiled graph may run in its place, or None where
    the graph keeps the operator (`_decomposition`), `backward` is its autograd formula (None: a
    backward through it raises, as through a `custom_op` without one). Returns
    `torch.ops.<namespace>.<name>.default`.

    Raises:
        OperatorError: the name or schema is malformed, declares a mutation, or the name is taken.
    """
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise OperatorError(f"an operator name looks like 'namespace::name', got {name!r}")
    namespace, opname = name.split("::")
    try:
        parsed = torch._C.parse_schema(f"{name}{schema}")
    except RuntimeError as error:
        raise OperatorError(
            f"operator `{name}`: schema {schema!r} does not parse ({str(error).splitlines()[0]}); write it "
            "as '(Tensor x, int n) -> Tensor'"
        ) from None
    if parsed.is_mutable:
        raise OperatorError(
            f"operator `{name}`: schema {schema!r} marks an input as written, but a selection returns new "
            "tensors and writes none of its inputs; remove the (a!) annotations"
        )
    if hasattr(getattr(torch.ops, namespace), opname):
        raise OperatorError(
            f"operator `{name}` already exists in this process: give this one another name (an operator "
            "cannot be redefined)"
        )
    # Not `torch.library.custom_op`: its layers cost a compiled program's every call more than these two
    # kernels (docs/design.md, "PyTorch integration").
    library = torch.library.Library(namespace, "FRAGMENT")  # type: ignore[no-untyped-call]
    library.define(f"{opname}{schema}")  # type: ignore[no-untyped-call]
    overload: torch._ops.OpOverload = getattr(getattr(torch.ops, namespace), opname).default
    library.impl(opname, run, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
    library.impl(opname, _autograd_kernel(overload, run, backward), "Autograd", with_keyset=True)  # type: ignore[no-untyped-call]
    torch.library.register_fake(name, fake, lib=library)
    torch.library.register_torch_dispatch(name, FunctionalTensorMode, _decomposition(pick), lib=library)
    _definitions[name] = library
    return overload


def _decomposition(pick: Callable[..., Callable[..., Any] | None]) -> Callable[..., Any]:
    """How functionalization (what `torch.compile` hands Inductor) sees a call: with static sizes, the pick
    itself, tuned now on example inputs if need be (a PyTorch function's call, or a template's launches
    through `wrap_triton`), which Inductor launches with no trip through the operator; otherwise (symbolic
    sizes, `torch.export`, which keeps operators whole, another kind of pick) the operator, which selects."""

    def functional(mode: Any, op: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = _traced_pick(pick, args, kwargs)
        if call is None:
            return mode.__torch_dispatch__(op, types, args, kwargs)
        with mode:
            return call(*args, **kwargs)

    return functional


def _traced_pick(
    pick: Callable[..., Callable[..., Any] | None], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[..., Any] | None:
    """What a traced call can run in the operator's place, or None."""
    if settings.current().compiled_picks == "off":
        return None
    if not getattr(torch._functorch.config, "decompose_custom_triton_ops", True):  # torch.export
        return None
    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    if not all(type(n) is int for t in tensors for n in (*t.shape, *t.stride())):  # symbolic sizes
        return None
    with _disable_current_modes(), torch.no_grad():  # real tensors, not traced ones
        generator: dict[torch.device, torch.Generator] = {}

        def real(value: Any) -> Any:
            if not isinstance(value, torch.Tensor):
                return value
            if value.device not in generator:
                generator[value.device] = example_generator(value.device)
            spec = TensorSpec(value.dtype, tuple(value.shape), tuple(value.stride()), 0, value.device)
            return example_tensor(spec, generator[value.device])

        try:
            return pick(*[real(v) for v in args], **{k: real(v) for k, v in kwargs.items()})
        except KernelpickError as error:  # no tuning here (TuningRequired), no valid choice, ...
            log.debug("the compiled graph keeps the operator: %s", error)  # which says so when it runs
            return None


def traceable_pick(selector: Selector, *inputs: Any, **kwargs: Any) -> Callable[..., Any] | None:
    """What a traced call of `selector` with inputs like these can run in its place (selecting first if
    needed): the pick's PyTorch function, or its template's launches through `wrap_triton` (None for
    another kind), the pick as the graph ranks it (`measured_as`), also after an eager selection."""
    with for_graphs():
        record = selector.tune(*inputs, **kwargs)
        ranking = measured_as(())
    signature = record.signature
    assert signature is not None  # a selection's record has one
    best = record.best_digest
    if record.measured_as != ranking:  # selected by an eager call: the graph runs its own ranking's pick
        results = {row.digest: row.result for row in record.candidates}
        best = pick_against_reference(results, selector.reference_digest(signature), measure=ranking).best
    choice = next((c for c in selector.expand(signature) if c.digest == best), None)
    if isinstance(choice, ExternChoice):
        call = choice.callable_for(signature)
        return call if _torch_function(call) else None
    templates = settings.current().compiled_picks == "all"  # not only PyTorch functions
    if isinstance(choice, TemplateChoice) and templates and _inductor_runs_triton(signature):
        return choice.traced_call(signature)
    return None


def _inductor_runs_triton(signature: Signature) -> bool:
    """Whether Inductor compiles Triton kernels for the inputs' device: not for CPU tensors (it fails
    with "0 active drivers"), where the graph keeps the operator, which runs the pick interpreted."""
    return not signature.device.interpreter


#: Functions of PyTorch operations alone that a compiled graph may trace in an operator's place.
_traceable: set[Callable[..., Any]] = set()


def traceable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn`, made of PyTorch operations alone (no data-dependent Python, no kernel launches), as a
    pick a compiled graph may trace in its operator's place, as it does `torch.mm` (`kernelpick.ops`)."""
    _traceable.add(fn)
    return fn


def _torch_function(call: Any) -> bool:
    """Whether `call` is one of PyTorch's own functions (`torch.mm`, an aten operator) or a `traceable`
    one, or one with some arguments given (`functools.partial(torch._scaled_mm, out_dtype=...)`)."""
    if isinstance(call, functools.partial):
        return _torch_function(call.func)
    if call in _traceable or isinstance(call, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    return isinstance(call, types.BuiltinFunctionType) and getattr(call, "__module__", None) == "torch"


_BELOW_AUTOGRAD = torch._C._after_autograd_keyset


class _Formula(torch.autograd.Function):
    """A selection's output that requires grad: computed below autograd, its gradients by the operator's
    formula (without one, the backward says none is registered, as a `custom_op`'s does)."""

    @staticmethod
    def forward(
        ctx: Any, overload: Any, keyset: Any, kwargs: dict[str, Any], backward: Backward | None, *args: Any
    ) -> Any:
        with torch._C._AutoDispatchBelowAutograd():
            output = overload.redispatch(keyset & _BELOW_AUTOGRAD, *args, **kwargs)
        ctx.overload, ctx.formula = overload, (backward, kwargs, len(args))
        if backward is not None:
            ctx.save_for_backward(*args, output)
        return output

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        backward, kwargs, count = ctx.formula
        if backward is None:
            raise RuntimeError(
                f"Trying to backward through {ctx.overload}, a kernelpick selection, which has no autograd "
                "formula"
            )
        saved = ctx.saved_tensors
        args, output = saved[:count], saved[count]
        wanted = ctx.needs_input_grad[4:]
        given = backward(args, kwargs, output, *grads)
        return (None, None, None, None, *(g if w else None for g, w in zip(given, wanted)))


#: The keys that may follow Autograd for `run` to be called at once: plain tensors on a device,
#: no functionalization, no tensor subclass or Python mode (FakeTensor, FunctionalTensor, ...).
_RUN_AT_ONCE = {torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA}
_IN_PLACE_OR_VIEW = torch._C.DispatchKey.ADInplaceOrView


def _autograd_kernel(
    overload: torch._ops.OpOverload, run: Callable[..., Any], backward: Backward | None
) -> Callable[..., Any]:
    """The operator's Autograd kernel: `run` itself for plain tensors that need no grad (no second trip
    through the dispatcher), else on to the keys below; `backward`'s gradients where an input needs them."""
    below_autograd = torch._C._AutoDispatchBelowAutograd
    grad_enabled = torch._C.is_grad_enabled
    any_requires_grad = torch._C._any_requires_grad
    redispatch = overload.redispatch
    at_once: dict[int, bool] = {}  # by keyset (its bits): a handful of them in a process

    def autograd(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if grad_enabled() and any_requires_grad(*args):
            return _Formula.apply(overload, keyset, kwargs, backward, *args)  # type: ignore[no-untyped-call]
        bits = keyset.raw_repr()
        plain = at_once.get(bits)
        if plain is None:
            below = (keyset & _BELOW_AUTOGRAD).remove(_IN_PLACE_OR_VIEW)
            plain = at_once[bits] = below.highestPriorityTypeId() in _RUN_AT_ONCE
        if plain:
            return run(*args, **kwargs)
        with below_autograd():
            return redispatch(keyset & _BELOW_AUTOGRAD, *args, **kwargs)

    return autograd


class SelectorOp:
    """A `Selector` as the PyTorch operator `name` (made by `Selector.as_op`), called like the selector:
    eagerly, the selector's own call; traced (`torch.compile`, `torch.export`, fake tensors, `make_fx`), a
    node of `torch.ops.<namespace>.<name>`, whose fake describes the output and which selects when it runs.

    Attributes:
        selector: the selector it calls.
        name: "namespace::name".
        overload: `torch.ops.<namespace>.<name>.default`, what traced programs call.
        schema: the operator's schema.
    """

    def __init__(
        self, selector: Selector, name: str, *, fake: Callable[..., Any] | None, schema: str | None
    ) -> None:
        self.selector = selector
        self.name = name
        described = _reference_function(selector, name) if fake is None else fake
        if not schema:  # from the annotations of the user's fake, else of the reference
            try:
                schema = str(torch.library.infer_schema(described, mutates_args=()))
            except (ValueError, TypeError, AttributeError) as error:  # AttributeError: a builtin (torch.add)
                raise OperatorError(
                    f"operator `{name}`: cannot infer a schema from the annotations of "
                    f"`{getattr(described, '__qualname__', described)}` ({error}); pass as_op(schema='(Tensor a, Tensor b) -> Tensor'), "
                    "or a fake= whose parameters and return value are annotated (torch.Tensor, int, float, ...)"
                ) from None

        def by_reference(*args: Any, **kwargs: Any) -> Any:  # the fake without a `fake=`
            try:
                return described(*args, **kwargs)
            except Exception as error:
                raise OperatorError(
                    f"operator `{name}` describes its output by running the reference of selector "
                    f"`{selector.name}` on tensors without data, which failed ({type(error).__name__}: "
                    f"{error}); if the inputs are right, the reference cannot run without data: pass "
                    "as_op(fake=...), a function of the same inputs that returns empty tensors shaped and "
                    "laid out like the output"
                ) from error

        fake = by_reference if fake is None else fake
        pick = functools.partial(traceable_pick, selector)
        # Its implementation on real tensors is the selection (tuning a new signature).
        self.overload = define_operator(name, selector.__call__, schema=schema, fake=fake, pick=pick)
        self.schema = str(self.overload._schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if dynamo_tracing() or dispatch_modes():
            return self.overload(*args, **kwargs)
        return self.selector(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<kernelpick SelectorOp {self.schema}>"


def _reference_function(selector: Selector, name: str) -> Callable[..., Any]:
    """The function a derived fake runs: the selector's reference when it is an extern or a function
    (OperatorError for none, or a Triton kernel or template: no output without a launch)."""
    target = selector._reference_target()
    if isinstance(target, ExternChoice):
        return target.fn
    if target is not None and not isinstance(target, (Choice, ChoiceSpace)) and callable(target):
        return target
    what = "has no extern choice or reference function"
    if target is not None:
        what = f"has the reference `{target.name}`, which is no extern choice or function,"
    raise OperatorError(
        f"operator `{name}`: selector `{selector.name}` {what} to run on tensors without data and describe "
        "the output (a Triton launch needs data); pass as_op(fake=...), a function of the same inputs that "
        "returns empty tensors shaped and laid out like the output (e.g. torch.empty_like(x))"
    )

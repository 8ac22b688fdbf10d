"""Operator schemas: inferred from annotations, or the user's, with the inferred mutations written in."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelpick.engine.choice import qualified_name
from kernelpick.errors import OperatorError


def parse(op_name: str, schema: str) -> Any:
    """The parsed `torch._C.FunctionSchema` of `schema` ("(Tensor x) -> Tensor").

    Raises:
        OperatorError: the schema does not parse.
    """
    try:
        return torch._C.parse_schema(f"{op_name}{schema}")
    except RuntimeError as error:
        raise OperatorError(
            f"op `{op_name}`: schema {schema!r} does not parse ({str(error).splitlines()[0]}); write it as "
            "'(Tensor x, int n) -> Tensor', or leave schema=None to infer it from the type annotations"
        ) from None


def base_schema(op_name: str, fn: Callable[..., Any], schema: str | None) -> str:
    """The schema without mutation annotations: the user's, or inferred from `fn`'s annotations.

    Raises:
        OperatorError: `fn` lacks annotations PyTorch can read, or `schema` does not parse.
    """
    if schema is not None:
        parse(op_name, schema)
        return schema
    if not inspect.isfunction(inspect.unwrap(fn)):
        # torch.library.infer_schema reads a Python function's annotations and globals: a builtin
        # (`torch.add`), a functools.partial or a callable object has neither
        raise OperatorError(
            f"op `{op_name}`: cannot infer a schema from {described(fn)}, which is not a Python function "
            "with annotations: pass schema='(Tensor x, Tensor y) -> Tensor' (its arguments and result), or "
            "wrap it in an annotated function (def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor)"
        )
    try:
        return str(torch.library.infer_schema(fn, mutates_args=()))
    except (ValueError, TypeError) as error:
        raise OperatorError(
            f"op `{op_name}`: cannot infer a schema from the annotations of `{fn.__qualname__}`: {error}. "
            "Annotate every parameter and the return value (torch.Tensor, int, float, bool, list[torch.Tensor], "
            "...), or pass schema='(Tensor x, int n) -> Tensor'"
        ) from None


def described(fn: Any) -> str:
    """How an error names the callable `fn`: as the store names a library function (`torch.add`), or,
    for an object without a name of its own (a partial, a callable instance), by its kind."""
    if getattr(fn, "__name__", None) is None:
        return f"a {type(fn).__name__} object"
    return f"`{qualified_name(fn)}`"


def declared_mutations(op_name: str, schema: str) -> tuple[str, ...]:
    """The arguments a schema marks as written (`Tensor(a!) x`)."""
    parsed = parse(op_name, schema)
    return tuple(
        arg.name for arg in parsed.arguments if arg.alias_info is not None and arg.alias_info.is_write
    )


def tensor_parameters(op_name: str, schema: str) -> tuple[str, ...]:
    """The schema's arguments that hold tensors (`Tensor`, `Tensor?`, `Tensor[]`), in order."""
    parsed = parse(op_name, schema)
    return tuple(arg.name for arg in parsed.arguments if "Tensor" in str(arg.type))


def parameter_names(op_name: str, schema: str) -> tuple[str, ...]:
    """Every argument of the schema, in order."""
    return tuple(arg.name for arg in parse(op_name, schema).arguments)


def keyword_only(op_name: str, schema: str) -> tuple[str, ...]:
    """The schema's keyword-only arguments (after `*`)."""
    return tuple(arg.name for arg in parse(op_name, schema).arguments if arg.kwarg_only)


_TENSOR_ARGUMENT = r"\bTensor(\([a-z0-9]+!?\))?(\[\]|\?)?(\s+){name}\b"


def with_mutations(op_name: str, schema: str, mutated: Sequence[str]) -> str:
    """`schema` with exactly the arguments in `mutated` annotated as written (`Tensor(a0!) x`).

    Raises:
        OperatorError: the result does not parse (an argument type kernelpick cannot annotate).
    """
    text = schema
    for index, name in enumerate(parameter_names(op_name, schema)):
        pattern = re.compile(_TENSOR_ARGUMENT.format(name=re.escape(name)))
        annotation = f"(a{index}!)" if name in mutated else ""
        text = pattern.sub(_annotate(annotation, name), text, count=1)
    if declared_mutations(op_name, text) != tuple(n for n in parameter_names(op_name, text) if n in mutated):
        raise OperatorError(
            f"op `{op_name}`: could not mark {', '.join(mutated)} as written in schema {schema!r}; "
            "only Tensor, Tensor? and Tensor[] arguments can be mutated"
        )
    return text


def _annotate(annotation: str, name: str) -> Callable[[re.Match[str]], str]:
    """The replacement of one `Tensor... name` match: the same type with `annotation` as its alias set."""

    def replace(match: re.Match[str]) -> str:
        return f"Tensor{annotation}{match.group(2) or ''}{match.group(3)}{name}"

    return replace


def bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`fn`'s arguments by parameter name, defaults applied.

    Raises:
        OperatorError: the arguments do not fit `fn`'s signature.
    """
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as error:
        raise OperatorError(f"`{fn.__qualname__}` cannot be called with these arguments: {error}") from None
    bound.apply_defaults()
    return dict(bound.arguments)

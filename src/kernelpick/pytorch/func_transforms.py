"""A mutating operator under `torch.func.functionalize`, which PyTorch supports for its own only."""

from __future__ import annotations

from typing import Any

import torch


def functionalize_call(overload: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call a mutating `overload` functionally if `torch.func.functionalize` is the innermost transform.

    The functorch transform refuses any custom operator that writes its inputs; AOTAutograd and
    `torch.export` functionalize one as `auto_functionalized(op, ...)` (a functional call on copies,
    then the copies replace the inputs), and this does the same for the functorch transform.

    Returns:
        The operator's result, or `NotImplemented` when no functorch functionalization is active or
        none of the arguments is one of its tensors (the caller then dispatches as usual).
    """
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter
    from torch._higher_order_ops.auto_functionalize import auto_functionalized
    from torch._subclasses.functional_tensor import FunctorchFunctionalizeAPI

    interpreter = retrieve_current_functorch_interpreter()
    if interpreter is None or interpreter.key() != TransformType.Functionalize:
        return NotImplemented
    schema = overload._schema
    named: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):
        if argument.name in kwargs:
            named[argument.name] = kwargs[argument.name]
        elif index < len(args):
            named[argument.name] = args[index]
        else:
            named[argument.name] = argument.default_value
    if not any(isinstance(v, torch.Tensor) and torch._is_functional_tensor(v) for v in _flat(named.values())):
        return NotImplemented
    ctx = FunctorchFunctionalizeAPI(interpreter)  # type: ignore[arg-type]
    unwrapped = ctx.unwrap_tensors(named)  # type: ignore[arg-type]
    with ctx.redispatch_to_next():
        outputs = auto_functionalized(overload, **unwrapped)  # type: ignore[arg-type]
    mutated = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    results, new_values = outputs[: len(outputs) - len(mutated)], outputs[len(outputs) - len(mutated) :]
    for name, new_value in zip(mutated, new_values):
        originals = named[name] if isinstance(named[name], (list, tuple)) else [named[name]]
        updates = new_value if isinstance(new_value, (list, tuple)) else [new_value]
        for original, update in zip(originals, updates):
            if original is None or update is None:
                continue
            ctx.replace(original, update)
            ctx.commit_update(original)
            ctx.sync(original)
    if len(schema.returns) == 0:
        return None
    if len(schema.returns) == 1:
        return ctx.wrap_tensors(results[0])  # type: ignore[arg-type]
    return ctx.wrap_tensors(tuple(results))  # type: ignore[arg-type]


def _flat(values: Any) -> list[Any]:
    flat: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            flat.extend(value)
        else:
            flat.append(value)
    return flat

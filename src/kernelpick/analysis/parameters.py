"""Which kernel argument each TTIR parameter of a specialized kernel comes from.

Triton drops constexpr arguments from the TTIR signature and expands others into several
parameters (a host-side `TensorDescriptor` becomes the descriptor plus its shape and strides; a
tuple becomes its elements). The expansion is asked of Triton's own types, so it follows
whatever the installed release does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelpick.compile.target import Specialization


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

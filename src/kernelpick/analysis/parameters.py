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


class _CountingBuilder:
    """Stands in for `ir.builder` when asking a Triton type how many IR values it flattens to."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _flattened_count(signature: Any, path: tuple[int, ...], constants: Mapping[tuple[int, ...], Any]) -> int:
    if path in constants:
        return 0
    if isinstance(signature, tuple):
        return sum(_flattened_count(s, (*path, i), constants) for i, s in enumerate(signature))
    if signature == "constexpr":
        return 0
    from triton.language import str_to_ty

    out: list[Any] = []
    str_to_ty(signature, None)._flatten_ir_types(_CountingBuilder(), out)
    return len(out)


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
        count = _flattened_count(source.signature[name], (index,), source.constants)
        names.extend([name] * count)
    return names

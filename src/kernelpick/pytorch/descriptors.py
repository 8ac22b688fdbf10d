"""Host tensor descriptors (TMA) as launch arguments: taken apart for a graph, made again at launch."""

from __future__ import annotations

import dataclasses
from typing import Any

#: The fields whose integers may be symbolic sizes: they stay graph integers. Every other field
#: (the block shape above all, which decides the kernel's types) is a constant of the launch.
SIZE_FIELDS = ("shape", "strides")


def metadata(descriptor: Any) -> list[tuple[str, Any]]:
    """Every field of `descriptor` but its base, by name, in declaration order: Triton's
    `TensorDescriptor` has shape, strides, block_shape, padding (and round_f32_to_tf32 in newer
    Tritons), Gluon's also a shared-memory layout."""
    return [(f.name, getattr(descriptor, f.name)) for f in dataclasses.fields(descriptor) if f.name != "base"]


def stand_in_sizes(field: str, rank: int) -> list[int]:
    """A shape or strides of `rank` dimensions that every descriptor class accepts, for the analysis.

    The analysis depends on the base's dtype, the block shape and the other constant fields, not
    on the sizes, which are not known while Dynamo traces.
    """
    if field == "strides":
        return [_STAND_IN] * (rank - 1) + [1]  # the last dimension contiguous, the others aligned
    return [_STAND_IN] * rank


#: A size and stride every descriptor accepts: a multiple of 32 bytes for any element size.
_STAND_IN = 64

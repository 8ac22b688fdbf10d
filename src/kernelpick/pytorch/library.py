"""The graph operator of a traced launch, `kernelpick::functional_launch`, and the plan it launches from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from kernelpick.pytorch.descriptors import SIZE_FIELDS, stand_in_sizes
from kernelpick.pytorch.hooks import Launch, current_handler
from kernelpick.pytorch.running import run_kernel
from kernelpick.pytorch.side_table import side_table

#: Where one launch argument comes from: ("tensor", i) and ("int", i) index the operator's lists;
#: ("constant", value) holds the value itself; ("sequence", slots) is a list of such values;
#: ("descriptor", (class, i, ((field, slot), ...))) is a tensor descriptor of class `class` over
#: tensor i, its other fields given by slots.
Slot = tuple[Literal["tensor", "int", "constant", "sequence", "descriptor"], Any]


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything about a traced launch that is not a tensor or an integer, by value.

    Attributes:
        positional: the slot of each positional argument.
        keywords: (name, slot) of each keyword argument.
        grid: the slots of a fixed grid's dimensions; empty when `grid_by_config` is used.
        grid_by_config: for a tuned kernel with a grid function, (config meta-parameters, grid slots)
            for each config, the grid function having been evaluated for each at trace time.
        written: the indices of the tensors the kernel writes, which are cloned and returned.
    """

    positional: tuple[Slot, ...]
    keywords: tuple[tuple[str, Slot], ...]
    grid: tuple[Slot, ...]
    grid_by_config: tuple[tuple[tuple[tuple[str, Any], ...], tuple[Slot, ...]], ...] = ()
    written: tuple[int, ...] = ()

    def launch_arguments(
        self, tensors: Sequence[torch.Tensor], ints: Sequence[int], *, stand_in: bool = False
    ) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        """The positional arguments, keyword arguments and grid to launch with.

        Args:
            tensors: the tensors the slots index.
            ints: the integers the slots index.
            stand_in: the arguments are for the access analysis, not a launch: tensor descriptors
                get placeholder shapes and strides (the integers may be placeholders that no
                descriptor would accept).
        """

        def value(slot: Slot) -> Any:
            kind, payload = slot
            if kind == "tensor":
                return tensors[payload]
            if kind == "int":
                return ints[payload]
            if kind == "sequence":
                return [value(s) for s in payload]
            if kind == "descriptor":
                descriptor_class, base, fields = payload
                made = {
                    name: stand_in_sizes(name, len(s[1])) if stand_in and _is_sizes(name, s) else value(s)
                    for name, s in fields
                }
                return descriptor_class(tensors[base], **made)  # the class checks the fields
            return payload

        args = tuple(value(s) for s in self.positional)
        kwargs = {name: value(s) for name, s in self.keywords}
        if self.grid_by_config:
            table = tuple((meta, tuple(value(s) for s in grid)) for meta, grid in self.grid_by_config)
            return args, kwargs, GridByConfig(table)
        return args, kwargs, tuple(value(s) for s in self.grid)


def _is_sizes(field: str, slot: Slot) -> bool:
    """Whether a descriptor's field is a shape or strides given as integers (possibly symbolic)."""
    return field in SIZE_FIELDS and slot[0] == "sequence"


@dataclass(frozen=True, slots=True)
class GridByConfig:
    """A grid function for a tuned kernel: the grid precomputed for each config, found by its meta-parameters."""

    table: tuple[tuple[tuple[tuple[str, Any], ...], tuple[int, ...]], ...]

    def __call__(self, meta: dict[str, Any]) -> tuple[int, ...]:
        for config, grid in self.table:
            if all(meta.get(name) == value for name, value in config):
                return grid
        raise LookupError(f"no traced grid matches the launch's meta-parameters; traced for {self.table}")


def clone_preserving_strides(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` with its sizes and strides (gaps and overlaps included), at storage offset 0."""
    if tensor.numel() == 0 or not torch._debug_has_internal_overlap(tensor):
        copy = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device)
        return copy.copy_(tensor)
    # Overlapping elements cannot be copied into one by one: copy the whole span they cover.
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.size(), tensor.stride()))
    buffer = torch.as_strided(tensor, (span,), (1,)).clone()
    return torch.as_strided(buffer, tensor.size(), tensor.stride())


def _functional_launch(
    kernel_id: int, plan_id: int, tensors: list[torch.Tensor], ints: list[int]
) -> list[torch.Tensor]:
    kernel = side_table.kernel(kernel_id)
    plan: LaunchPlan = side_table.constant(plan_id)
    tensors = list(tensors)
    for index in plan.written:
        tensors[index] = clone_preserving_strides(tensors[index])
    args, kwargs, grid = plan.launch_arguments(tensors, ints)
    handler = current_handler()
    if handler is not None:
        handler(Launch(kernel, grid, args, kwargs), None)
    else:
        run_kernel(kernel, grid, args, kwargs)
    return [tensors[index] for index in plan.written]


def _functional_launch_fake(
    kernel_id: int, plan_id: int, tensors: list[torch.Tensor], ints: list[int]
) -> list[torch.Tensor]:
    plan: LaunchPlan = side_table.constant(plan_id)
    return [clone_preserving_strides(tensors[index]) for index in plan.written]


SCHEMA = "functional_launch(int kernel_id, int plan_id, Tensor[] tensors, SymInt[] ints) -> Tensor[]"


def _define() -> Any:
    library = torch.library.Library("kernelpick", "FRAGMENT")  # type: ignore[no-untyped-call]
    library.define(SCHEMA)  # type: ignore[no-untyped-call]
    library.impl("functional_launch", _functional_launch, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
    torch.library.register_fake("kernelpick::functional_launch", _functional_launch_fake, lib=library)
    return library


_library = _define()


def functional_launch(
    kernel_id: int, plan_id: int, tensors: list[torch.Tensor], ints: list[Any]
) -> list[torch.Tensor]:
    """Call `torch.ops.kernelpick.functional_launch` (what a traced graph records).

    It clones the tensors its kernel writes (strides preserved), launches the kernel on the clones
    and returns them; a tensor descriptor argument is made again over its base tensor (or the base's
    clone). The kernel and its `LaunchPlan` live in the side table, by id; tensors and integers stay
    graph inputs, so sizes may be symbolic under dynamic shapes. Its fake implementation only
    describes the clones.
    """
    return torch.ops.kernelpick.functional_launch(kernel_id, plan_id, tensors, ints)  # type: ignore[no-any-return]

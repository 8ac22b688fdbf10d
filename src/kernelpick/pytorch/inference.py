"""Which inputs of an operator its kernels write: recorded launches, mapped back to inputs by storage."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from kernelpick.analysis import analyze
from kernelpick.compile.unwrap import innermost
from kernelpick.errors import AnalysisError, MutatesArgsError, OperatorError
from kernelpick.pytorch.hooks import Launch
from kernelpick.pytorch.launch_tracing import Recording, isolated
from kernelpick.pytorch.running import kernel_name, tensors_in

logger = logging.getLogger("kernelpick.pytorch")


@dataclass(frozen=True, slots=True)
class InputWrite:
    """One reason an operator's input counts as mutated.

    Attributes:
        input: the operator's parameter that is written.
        kernel: the kernel that writes it ("" when a PyTorch in-place operation in the function does).
        argument: the kernel's parameter the input (or a view of it) was passed as ("" likewise).
        through_view: True when the kernel was given a view of the input rather than the input itself.
    """

    input: str
    kernel: str
    argument: str
    through_view: bool = False

    def describe(self) -> str:
        if not self.kernel:
            return f"`{self.input}` is written by a PyTorch in-place operation in the function"
        view = "a view of " if self.through_view else ""
        return f"kernel `{self.kernel}` writes {view}`{self.input}` through its parameter `{self.argument}`"


@dataclass(frozen=True, slots=True)
class Inference:
    """What the launches of one recorded call write, in terms of the operator's inputs.

    Attributes:
        mutated: the written inputs, in the operator's parameter order.
        writes: every write that makes an input mutated, kernel by kernel.
        kernels: the kernels launched, in order of first launch.
        certain: False when some kernel's analysis was conservative; every tensor input that kernel
            was given then counts as written.
        reason: why the answer is not certain ("" when it is).
    """

    mutated: tuple[str, ...]
    writes: tuple[InputWrite, ...]
    kernels: tuple[str, ...]
    certain: bool = True
    reason: str = ""

    def why(self, name: str) -> str:
        """Every reason input `name` counts as mutated, joined into one sentence ("" when it is not)."""
        return "; ".join(dict.fromkeys(w.describe() for w in self.writes if w.input == name))


def infer_mutations(recording: Recording, parameters: Sequence[str]) -> Inference:
    """Which of the recorded call's inputs its launches (or its PyTorch in-place operations) write.

    A kernel argument counts as an input when it shares the input's storage: the input itself or
    any view of it. Tensors the function allocated itself (outputs, scratch space) are not inputs.

    Raises:
        OperatorError: a recorded launch does not fit its kernel's signature.
    """
    owners = _storage_owners(recording.inputs)
    writes: list[InputWrite] = []
    kernels: list[str] = []
    doubts: list[str] = []
    for launch in recording.launches:
        name = kernel_name(launch.kernel)
        if name not in kernels:
            kernels.append(name)
        access = analyze_launch(launch)
        if not access.certain:
            doubts.append(f"`{name}`: {access.reason}")
        named = bind_launch(launch)
        for argument in access.mutated:
            for tensor in tensors_in([named.get(argument)]):
                for input_name, original in owners.get(storage_key(tensor), ()):
                    writes.append(InputWrite(input_name, name, argument, tensor is not original))
    writes += [InputWrite(name, "", "") for name in recording.written_by_torch()]
    written = {w.input for w in writes}
    return Inference(
        mutated=tuple(p for p in parameters if p in written),
        writes=tuple(dict.fromkeys(writes)),
        kernels=tuple(kernels),
        certain=not doubts,
        reason="; ".join(dict.fromkeys(doubts)),
    )


def analyze_launch(launch: Launch) -> Any:
    """The access analysis of one recorded launch, outside any tracer.

    Raises:
        OperatorError: the launch's arguments do not fit the kernel.
    """
    try:
        with isolated():
            return analyze(launch.kernel, *launch.args, **launch.kwargs)
    except AnalysisError as error:
        raise OperatorError(
            f"a launch of kernel `{kernel_name(launch.kernel)}` cannot be analyzed: {error}"
        ) from error


def bind_launch(launch: Launch) -> dict[str, Any]:
    """A launch's arguments by the kernel's parameter names."""
    names = list(getattr(innermost(launch.kernel), "arg_names", ()))
    return {**dict(zip(names, launch.args)), **launch.kwargs}


def aliased_outputs(recording: Recording) -> list[tuple[int, str]]:
    """(output position, input name) for every output tensor sharing memory with an input."""
    owners = _storage_owners(recording.inputs)
    outputs = recording.output if isinstance(recording.output, (tuple, list)) else (recording.output,)
    found = []
    for position, output in enumerate(outputs):
        for tensor in tensors_in([output]):
            for input_name, _ in owners.get(storage_key(tensor), ()):
                found.append((position, input_name))
    return found


def check_declared_names(op_name: str, declared: Sequence[str], tensor_parameters: Sequence[str]) -> None:
    """Every name an explicit `mutates_args` gives must be a tensor parameter.

    Raises:
        MutatesArgsError: naming those that are not, and the tensor parameters there are.
    """
    unknown = [name for name in declared if name not in tensor_parameters]
    if unknown:
        raise MutatesArgsError(
            f"op `{op_name}`: mutates_args names {', '.join(f'`{n}`' for n in unknown)}, which "
            f"{'is not a tensor parameter' if len(unknown) == 1 else 'are not tensor parameters'} of the "
            f"function; its tensor parameters are {', '.join(tensor_parameters) or '(none)'}"
        )


def check_declared(
    op_name: str, declared: Iterable[str], inference: Inference, tensor_parameters: Sequence[str]
) -> None:
    """Compare an explicit `mutates_args` with what the kernels were found to write.

    Every disagreement is an error when the analysis is certain. When it is not, only writes the
    analysis proved must be declared, and the declaration is trusted for the rest.

    Raises:
        MutatesArgsError: naming each input declared but not written, or written but not declared,
            and the kernel (and kernel parameter) that writes it.
    """
    declared = tuple(declared)
    check_declared_names(op_name, declared, tensor_parameters)
    problems = []
    for name in inference.mutated:
        if name not in declared and (inference.certain or _proven(inference, name)):
            problems.append(
                f"`{name}` is written but not declared ({inference.why(name)}): add it to mutates_args"
            )
    if inference.certain:
        launched = ", ".join(f"`{k}`" for k in inference.kernels) or "none"
        for name in declared:
            if name not in inference.mutated:
                problems.append(
                    f"`{name}` is declared but nothing writes it (kernels launched: {launched}): "
                    "remove it from mutates_args"
                )
    elif declared != inference.mutated:
        logger.warning(
            "op `%s`: mutates_args=%s is trusted where the analysis is unsure (%s)",
            op_name,
            declared,
            inference.reason,
        )
    if problems:
        raise MutatesArgsError(
            f"op `{op_name}`: mutates_args={declared!r} disagrees with what its kernels write: "
            + "; ".join(problems)
            + ". Or leave mutates_args='infer' to use what kernelpick found"
        )


def _proven(inference: Inference, name: str) -> bool:
    """Whether a write of `name` stands even when the analysis is unsure: a PyTorch in-place write."""
    return any(w.input == name and not w.kernel for w in inference.writes)


def _storage_owners(inputs: dict[str, Any]) -> dict[Any, list[tuple[str, torch.Tensor]]]:
    owners: dict[Any, list[tuple[str, torch.Tensor]]] = {}
    for name, value in inputs.items():
        for tensor in tensors_in([value]):
            owners.setdefault(storage_key(tensor), []).append((name, tensor))
    return owners


def storage_key(tensor: torch.Tensor) -> Any:
    """What two tensors sharing memory (a tensor and its views, fake tensors included) have in common."""
    return StorageWeakRef(tensor.untyped_storage())  # type: ignore[no-untyped-call]


def check_outputs(op_name: str, recording: Recording) -> None:
    """Reject outputs that alias inputs: a PyTorch operator's outputs must be new tensors.

    Raises:
        OperatorError: naming the output and the input it shares memory with.
    """
    aliased = aliased_outputs(recording)
    if aliased:
        position, name = aliased[0]
        raise OperatorError(
            f"op `{op_name}`: output {position} shares memory with input `{name}` (it is the input or a "
            "view of it); a PyTorch operator must return new tensors. Return nothing for an in-place "
            f"operation (`{name}` is then reported mutated), or return a copy such as `{name}.clone()`"
        )


def certain_or_warn(op_name: str, inference: Inference) -> None:
    """Log once, at registration, that conservative answers made inputs count as written."""
    if not inference.certain:
        logger.warning(
            "op `%s`: the access analysis is unsure (%s), so every tensor input those kernels were given "
            "counts as mutated: %s. Pass mutates_args to say which really are",
            op_name,
            inference.reason,
            ", ".join(inference.mutated) or "none",
        )

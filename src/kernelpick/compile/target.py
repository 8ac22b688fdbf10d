"""Specialize a Triton kernel for concrete arguments and lower it for an explicit target, no GPU needed."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource, make_backend
from triton.runtime.driver import driver
from triton.runtime.jit import JITFunction, create_function_from_signature
from triton.tools.tensor_descriptor import TensorDescriptor  # every supported Triton (3.4 on) has it

from kernelpick.compile.launch import language_lock
from kernelpick.compile.twins import compilable, compiling
from kernelpick.errors import AnalysisError, describe_value

#: The target used when no GPU is visible: a Hopper GPU, the newest architecture every Triton 3.x knows.
FALLBACK_TARGET = GPUTarget("cuda", 90, 32)


@functools.cache
def default_target() -> GPUTarget:
    """The current GPU's target when there is one, else `FALLBACK_TARGET`."""
    if torch.cuda.is_available():
        target: GPUTarget = driver.active.get_current_target()
        return target
    return FALLBACK_TARGET


@dataclass(frozen=True)
class Specialization:
    """A kernel bound to one set of argument types and constexpr values, ready to lower."""

    kernel: JITFunction[Any]
    source: ASTSource
    options: Any
    target: GPUTarget
    backend: Any

    def lower(self, stage: str = "ttir") -> Any:
        """Run Triton's pipeline up to and including `stage` and return that stage's module
        (`"source"`: the module straight from code generation, before any pass)."""
        context = ir.context()
        ir.load_dialects(context)
        self.backend.load_dialects(context)
        codegen_fns = self.backend.get_codegen_implementation(self.options)
        with language_lock, compiling(self.kernel):  # not while another thread interprets a kernel
            module = self.source.make_ir(
                self.target, self.options, codegen_fns, self.backend.get_module_map(), context
            )
        if stage == "source":
            return module
        stages: dict[str, Any] = {}
        self.backend.add_stages(stages, self.options, self.source.language)
        if stage not in stages:
            raise ValueError(f"unknown stage {stage!r}; Triton's stages here are {list(stages)}")
        metadata: dict[str, Any] = {}
        for name, run_stage in stages.items():
            module = run_stage(module, metadata)
            if name == stage:
                break
        return module


def as_jit_function(kernel: Any) -> JITFunction[Any]:
    """The `triton.jit` function itself (for one decorated under TRITON_INTERPRET=1, its compilable twin),
    or a clear error for what cannot be lowered."""
    jit = compilable(kernel)
    if isinstance(jit, JITFunction):
        return jit
    raise AnalysisError(
        f"expected a @triton.jit function, got {type(kernel).__name__}: {describe_value(kernel)}"
    )


def bind_arguments(
    kernel: JITFunction[Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Map launch arguments to the kernel's parameter names, with a clear error for missing or extra ones."""
    names = kernel.arg_names
    options = {k: v for k, v in kwargs.items() if k not in names}
    given = {k: v for k, v in kwargs.items() if k in names}
    if len(args) > len(names):
        raise AnalysisError(
            f"kernel `{kernel.__name__}` takes {len(names)} arguments, got {len(args)} positional ones"
        )
    bound = dict(zip(names, args))
    twice = sorted(set(bound) & set(given))
    if twice:
        raise AnalysisError(
            f"kernel `{kernel.__name__}`: argument(s) {twice} given both by position and by name"
        )
    bound.update(given)
    parameters = kernel.signature.parameters
    missing = [n for n in names if n not in bound and parameters[n].default is inspect.Parameter.empty]
    if missing:
        raise AnalysisError(
            f"kernel `{kernel.__name__}` takes {len(names)} arguments, got {len(bound)}: "
            f"missing {', '.join(f'`{m}`' for m in missing)}"
        )
    return {**{n: bound[n] if n in bound else parameters[n].default for n in names}, **options}


def _stand_in(value: Any) -> Any:
    """Replace tensors of any kind (real, CPU, meta, fake) by a meta tensor of the same dtype."""
    if isinstance(value, torch.Tensor):
        with torch._C._DisableTorchDispatch():
            return torch.empty(0, dtype=value.dtype, device="meta")
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        # Only the type matters for lowering; 2 avoids Triton's special case for the value 1.
        return {torch.SymInt: 2, torch.SymFloat: 2.0, torch.SymBool: True}[type(value)]
    if isinstance(value, tuple):
        return type(value)(_stand_in(v) for v in value) if not hasattr(value, "_fields") else value
    if not isinstance(value, TensorDescriptor):
        return value
    base = value.base
    if isinstance(base, torch.Tensor):
        # Host descriptors need 16-byte aligned strides; a tiny real CPU tensor satisfies that.
        elements = max(1, 16 // base.element_size())
        with torch._C._DisableTorchDispatch():
            base = torch.empty([elements] * len(value.block_shape), dtype=base.dtype)
    return TensorDescriptor.from_tensor(base, list(value.block_shape))


def specialize(
    kernel: Any,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    target: GPUTarget | None = None,
) -> Specialization:
    """Bind `kernel` to launch arguments and make the source Triton would compile for them.

    Args:
        kernel: a `triton.jit` function.
        args: positional launch arguments; tensors may be real, CPU, meta or fake.
        kwargs: keyword launch arguments, constexprs and compile options (`num_warps`, ...) included.
        target: the GPU to lower for (default: the current GPU, else a Hopper GPU).

    Raises:
        AnalysisError: the arguments do not match the kernel's signature.
    """
    jit = as_jit_function(kernel)
    target = target or default_target()
    backend = make_backend(target)
    named = bind_arguments(jit, args, kwargs or {})
    named = {k: _stand_in(v) for k, v in named.items()}
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound_args, specialization, options = binder(**named)
    launch_kwargs = {k: v for k, v in named.items() if k not in jit.arg_names}
    options, signature, constexprs, attrs = jit._pack_args(
        backend, launch_kwargs, bound_args, specialization, options
    )
    return Specialization(jit, ASTSource(jit, signature, constexprs, attrs), options, target, backend)

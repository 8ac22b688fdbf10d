"""`kernelpick.TritonTemplate`: Triton source with Jinja2 holes, rendered per config and signature."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
import torch

from kernelpick.codegen import CodeBuffer
from kernelpick.config import Config
from kernelpick.device import DeviceInfo, Requirements
from kernelpick.errors import TemplateError
from kernelpick.select.render import Epilogue, Hook, PartialRender
from kernelpick.tensors import TensorSpec

OUTPUT = "OUT"
_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
)
#: A template's source compiled once a process (a template keeps only its source, which pickles): a
#: worker receives each candidate's template anew (compiling them again: docs/benchmarks.md, py-spy).
_compiled = functools.lru_cache(maxsize=64)(_ENV.from_string)
_TL_DTYPES: dict[torch.dtype, str] = {torch.bool: "tl.int1"} | {
    getattr(torch, name): f"tl.{name}"
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
}


@dataclass(frozen=True, slots=True)
class GridContext:
    """What a template's `grid` function is given: the output, the inputs, the meta-parameters, the device."""

    output: TensorSpec
    inputs: Mapping[str, TensorSpec]
    meta: Mapping[str, Any]
    device: DeviceInfo


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a rendered kernel and where its value comes from.

    `kind` is "tensor" (the input named `source`), "output", "descriptor" (a `TensorDescriptor` of
    `source` with `shape`, `strides` and `block`), "workspace" (a new float32 tensor of size `shape`)
    or "int" (the constant `value`, a size or stride passed when shapes are not static).
    """

    name: str
    kind: str
    source: str = ""
    value: int = 0
    shape: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    block: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Launch:
    """A kernel launched after a rendered template's first: name, grid and options (None: the config's)."""

    kernel_name: str
    grid: tuple[int, ...]
    num_warps: int | None = None
    num_stages: int | None = None


@dataclass(frozen=True, slots=True)
class RenderedKernel:
    """A rendered template: its source, its kernel's name and parameters, the output and the grid; `after`:
    the kernels launched after it, in order, with the same parameters (most templates have none)."""

    source: str
    kernel_name: str
    parameters: tuple[Parameter, ...]
    output: TensorSpec
    grid: tuple[int, ...]
    after: tuple[Launch, ...] = ()

    @property
    def digest(self) -> str:
        """The source's hash, with the later kernels' grids and options (they are not in the source)."""
        text = self.source if not self.after else self.source + repr(self.after)
        return hashlib.sha256(text.encode()).hexdigest()


OutputRule = Callable[..., tuple[Sequence[int], torch.dtype]]
GridRule = Callable[[GridContext], Sequence[int]]


class TritonTemplate:
    """Triton kernel source with Jinja2 holes (docs/selection.md, "Templates", says what the source can use).

    Args:
        name: the template's name (a Python identifier; rendered kernels are named after it).
        source: Jinja2 text of a module body that defines one kernel with `{{ def_kernel() }}`.
        inputs: names of the template's tensor inputs, in the order of the kernel's first parameters.
        output: `output(*input_specs) -> (size, dtype)` of the output, from the inputs' `TensorSpec`s.
        grid: `grid(context) -> tuple` of the launch grid, from a `GridContext`.
        requires: what a device must have to run it (`kernelpick.Requirements`, e.g.
            `min_capability=(9, 0)`); on others its choices are skipped, saying why.

    Raises:
        TemplateError: the name is not an identifier or the source is not valid Jinja2.
    """

    def __init__(
        self,
        name: str,
        source: str,
        *,
        inputs: Sequence[str],
        output: OutputRule,
        grid: GridRule,
        requires: Requirements | None = None,
    ) -> None:
        if not name.isidentifier():
            raise TemplateError(
                f"template name {name!r} is not a Python identifier: kernels are named after it"
            )
        try:
            _compiled(source)  # checked now; rendering finds it compiled
        except jinja2.TemplateSyntaxError as error:
            raise TemplateError(
                f"template `{name}` is not valid Jinja2 (line {error.lineno}): {error.message}"
            ) from None
        self.name, self.source, self.inputs = name, source, tuple(inputs)
        self.output_rule, self.grid_rule, self.requires = output, grid, requires
        self.source_hash = hashlib.sha256(source.encode()).hexdigest()[:20]

    def render(
        self,
        config: Config,
        inputs: Mapping[str, TensorSpec],
        epilogue: Epilogue | None = None,
        **options: Any,
    ) -> str:
        """The kernel's module source for one config and these input specs (see `prepare` for options)."""
        return self.prepare(config, inputs, epilogue, **options).source

    def prepare(
        self,
        config: Config,
        inputs: Mapping[str, TensorSpec],
        epilogue: Epilogue | None = None,
        *,
        device: DeviceInfo | None = None,
        output: TensorSpec | None = None,
        constants: Mapping[str, Any] | None = None,
        static_shapes: bool = True,
    ) -> RenderedKernel:
        """Render for one config and signature.

        Args:
            config: the meta-parameters (rendered as constants) and launch options.
            inputs: a `TensorSpec` per template input and per epilogue input, by name.
            epilogue: code applied to the accumulator before it is stored.
            device: the device rendered for (default: a CPU, i.e. Triton's interpreter).
            output: the output's spec (default: `output(...)` of the template, row-major).
            constants: more values for the source, as Jinja2 variables and `tl.constexpr`s.
            static_shapes: bake sizes and strides into the source (else pass them as arguments).

        Raises:
            TemplateError: an input is missing, the source fails to render, or the epilogue cannot apply.
        """
        missing = [n for n in (*self.inputs, *(epilogue.inputs if epilogue else ())) if n not in inputs]
        if missing:
            raise TemplateError(
                f"template `{self.name}` needs specs for {missing}; it was given {sorted(inputs)}"
            )
        device = device or DeviceInfo("cpu", None, "cpu", None, 0, 0)
        if output is None:  # a new row-major tensor
            any_tensor = inputs[self.inputs[0]] if self.inputs else next(iter(inputs.values()))
            size, dtype = self.output_rule(*(inputs[name] for name in self.inputs))
            output = TensorSpec.contiguous(tuple(int(s) for s in size), dtype, any_tensor.device)
        return _RenderState(
            self, config, inputs, epilogue, output, device, dict(constants or {}), static_shapes
        ).render()


@dataclass
class _RenderState:
    """The functions a template calls while rendering, and what they registered."""

    template: TritonTemplate
    config: Config
    inputs: Mapping[str, TensorSpec]
    epilogue: Epilogue | None
    output: TensorSpec
    device: DeviceInfo
    constants: dict[str, Any]
    static: bool
    #: The parameters the source asked for, by name, after the tensors and the output (`_parameters`).
    workspaces: dict[str, Parameter] = field(default_factory=dict)
    descriptors: dict[str, Parameter] = field(default_factory=dict)
    integers: dict[str, Parameter] = field(default_factory=dict)
    #: The kernels after the first, named by their suffix until the end.
    launches: list[Launch] = field(default_factory=list)
    defined: bool = False
    hooks: dict[str, Hook] = field(default_factory=dict)
    stored: bool = False
    kernel_name: str = ""  # known once the body is rendered: the hooks that name it run after

    def __post_init__(self) -> None:
        clash = sorted(set(self.config.kwargs) & set(self.constants))
        if clash:
            raise TemplateError(f"{clash} are both meta-parameters of the config and constants")
        self.specs = {**self.inputs, OUTPUT: self.output}

    def _placeholder(self, label: str, hook: Hook) -> str:
        key = f"<KERNELPICK_{label}_{len(self.hooks)}>"
        self.hooks[key] = hook
        return key

    def spec(self, name: str) -> TensorSpec:
        if name not in self.specs:
            raise TemplateError(
                f"template `{self.template.name}` refers to {name!r}; known: {sorted(self.specs)}"
            )
        return self.specs[name]

    # -- functions the template source calls ---------------------------------------------------
    def size_hint(self, name: str, dim: int) -> int:
        return self.spec(name).size[dim]

    def stride_hint(self, name: str, dim: int) -> int:
        return self.spec(name).stride[dim]

    def _integer(self, name: str, what: str, dim: int, value: int) -> str:
        if self.static:
            return str(value)
        parameter = f"{name}_{what}_{dim}"
        self.integers.setdefault(parameter, Parameter(parameter, "int", value=value))
        return parameter

    def size(self, name: str, dim: int) -> str:
        return self._integer(name, "size", dim, self.size_hint(name, dim))

    def stride(self, name: str, dim: int) -> str:
        return self._integer(name, "stride", dim, self.stride_hint(name, dim))

    def dtype(self, name: str) -> str:
        dtype = self.spec(name).dtype
        if dtype not in _TL_DTYPES:
            raise TemplateError(f"no Triton dtype for {dtype} (input {name!r})")
        return _TL_DTYPES[dtype]

    def tensor_descriptor(self, name: str, block: Sequence[Any], permute: Sequence[int] | None = None) -> str:
        spec = self.spec(name)
        if name == OUTPUT:
            raise TemplateError("tensor_descriptor of the output is not supported: store with store_output")
        order = list(permute) if permute is not None else list(range(spec.ndim))
        if sorted(order) != list(range(spec.ndim)):
            raise TemplateError(f"permute={order} is not a permutation of {spec.ndim} dimensions")
        shape = tuple(spec.size[d] for d in order)
        strides = tuple(spec.stride[d] for d in order)
        sizes = tuple(int(self.config.kwargs.get(b, b)) if isinstance(b, str) else int(b) for b in block)
        if strides[-1] != 1 or any(s * spec.itemsize % 16 for s in (*strides[:-1], spec.offset)):
            raise TemplateError(
                f"input {name!r} ({spec}) cannot be read through a tensor descriptor: the last "
                "dimension must be contiguous and other strides and the offset 16-byte aligned"
            )
        parameter = f"{name}_desc" + ("" if permute is None else "_" + "".join(map(str, order)))
        self.descriptors.setdefault(
            parameter, Parameter(parameter, "descriptor", name, 0, shape, strides, sizes)
        )
        return parameter

    def store_output(self, indices: Sequence[str], value: str, mask: str | None = None) -> str:
        if isinstance(indices, str):
            raise TemplateError("store_output takes a tuple of index expressions, one per output dimension")
        if len(indices) != self.output.ndim:
            raise TemplateError(
                f"store_output got {len(indices)} indices for a {self.output.ndim}-dimensional output"
            )
        self.stored = True
        # Written now, so that the sizes and strides it uses are parameters before def_kernel's hook
        # runs; the placeholder only carries the indentation of the call site.
        code = CodeBuffer()
        masked = f", mask={mask}" if mask else ""
        result = value
        if self.epilogue is not None:
            code.line(f"# epilogue: {self.epilogue.name}")
            names = {"acc": value}
            for name in self.epilogue.inputs:
                strides = self.spec(name).broadcast_strides(self.output.size)
                other = ", other=0.0" if mask else ""
                # By the output's dimensions: an input the template reads itself has its own strides
                # by its own dimensions, under the names `stride(name, dim)` gives.
                what = "epilogue_stride" if name in self.template.inputs else "stride"
                offset = self._offset(name, indices, strides, what)
                code.line(f"epilogue_{name} = tl.load({name} + {offset}{masked}{other}).to(tl.float32)")
                names[name] = f"epilogue_{name}"
            code.line(f"epilogue_result = {self.epilogue.code(names)}")
            result = "epilogue_result"
        offset = self._offset(OUTPUT, indices, self.output.stride)
        code.line(f"tl.store({OUTPUT} + {offset}, ({result}).to({OUTPUT}.dtype.element_ty){masked})")
        text = code.getvalue()
        return self._placeholder("STORE_OUTPUT", lambda: text)

    def workspace(self, name: str, size: Sequence[int]) -> str:
        if not name.isidentifier() or name in {**self.specs, **self.config.kwargs, **self.constants}:
            raise TemplateError(
                f"workspace name {name!r} must be an identifier that names no input, output, "
                "meta-parameter or constant"
            )
        shape = tuple(int(s) for s in size)
        if any(s < 0 for s in shape):
            raise TemplateError(f"workspace {name!r} has a negative size {list(shape)}")
        found = self.workspaces.setdefault(name, Parameter(name, "workspace", shape=shape))
        if found.shape != shape:
            raise TemplateError(
                f"workspace {name!r} is asked for with sizes {list(found.shape)} and {list(shape)}"
            )
        return name

    def def_kernel(
        self,
        name: str | None = None,
        grid: Sequence[int] | None = None,
        num_warps: int | None = None,
        num_stages: int | None = None,
    ) -> str:
        if not self.defined:
            if name is not None or grid is not None or num_warps is not None or num_stages is not None:
                raise TemplateError(
                    f"template `{self.template.name}`: the first def_kernel() takes no arguments (its grid "
                    "is the template's and its options the config's); name and grid the kernels after it"
                )
            self.defined = True
            return self._placeholder("DEF_KERNEL", lambda: self._def_code(self.kernel_name))
        if name is None or not name.isidentifier() or grid is None:
            raise TemplateError(
                f"template `{self.template.name}`: a kernel after the first needs a name (an identifier) "
                f'and a grid, e.g. def_kernel("reduce", grid=[blocks]); got name={name!r}, grid={grid!r}'
            )
        if any(launch.kernel_name == name for launch in self.launches):
            raise TemplateError(f"template `{self.template.name}` defines two kernels named {name!r}")
        self.launches.append(Launch(name, tuple(int(g) for g in grid), num_warps, num_stages))
        return self._placeholder("DEF_KERNEL", lambda: self._def_code(f"{self.kernel_name}_{name}"))

    # -- hooks ---------------------------------------------------------------------------------
    def _offset(self, name: str, indices: Sequence[str], strides: Sequence[int], what: str = "stride") -> str:
        terms = []
        for dim, (index, stride) in enumerate(zip(indices, strides)):
            if stride == 0:
                continue
            if self.static:
                terms.append(f"({index})" if stride == 1 else f"({index}) * {stride}")
            else:
                terms.append(f"({index}) * {self._integer(name, what, dim, stride)}")
        if not terms:  # a broadcast scalar: the pointer must still be a block of the tile's shape
            terms = [f"0 * ({index})" for index in indices]
        return " + ".join(terms)

    def _def_code(self, kernel_name: str) -> str:
        code = CodeBuffer()
        code.line("@triton.jit")
        code.line(f"def {kernel_name}({', '.join(p.name for p in self._parameters())}):")
        with code.indent():
            for name, value in {**self.config.kwargs, **self.constants}.items():
                if not isinstance(value, (bool, int, float, str)):
                    raise TemplateError(
                        f"constant {value!r} of type {type(value).__name__} cannot be written into a kernel"
                    )
                code.line(f"{name}: tl.constexpr = {value!r}")
        return code.getvalue()

    def _parameters(self) -> tuple[Parameter, ...]:
        """Every parameter of a kernel of the render, in order: the template's inputs, the epilogue's
        others, the output, then what the source asked for."""
        extra = () if self.epilogue is None else self.epilogue.inputs
        tensors = [*self.template.inputs, *(n for n in extra if n not in self.template.inputs)]
        return (
            *(Parameter(n, "tensor", n) for n in tensors),
            Parameter(OUTPUT, "output"),
            *self.workspaces.values(),
            *self.descriptors.values(),
            *self.integers.values(),
        )

    # -- the render ----------------------------------------------------------------------------
    def render(self) -> RenderedKernel:
        int64 = any(spec.storage_length >= 2**31 for spec in self.specs.values())
        inputs = {n: s for n, s in self.specs.items() if n != OUTPUT}
        meta = {**self.constants, **self.config.kwargs}
        variables: dict[str, Any] = {
            **meta,
            "num_warps": self.config.num_warps,
            "num_stages": self.config.num_stages,
            "inputs": inputs,
            "output": self.output,
            "device": self.device,
            "static_shapes": self.static,
            "int64_index": int64,
        }
        called = ("def_kernel", "size", "stride", "size_hint", "stride_hint", "dtype", "tensor_descriptor")
        functions = {name: getattr(self, name) for name in (*called, "workspace", "store_output")}
        try:
            body = _compiled(self.template.source).render(**variables, **functions)
        except TemplateError:
            raise
        except Exception as error:  # whatever the template's own logic raised
            raise TemplateError(
                f"template `{self.template.name}` failed to render for config {self.config}: "
                f"{type(error).__name__}: {error}"
            ) from error
        if self.epilogue is not None and not self.stored:
            raise TemplateError(
                f"template `{self.template.name}` never calls store_output, so it cannot apply an epilogue"
            )
        self.kernel_name = f"{self.template.name}_{hashlib.sha256(body.encode()).hexdigest()[:8]}"
        header = CodeBuffer()
        header.line(f"# Rendered by kernelpick from template `{self.template.name}`; do not edit.")
        header.line(f"# config: {self.config}")
        if self.epilogue is not None:
            header.line(f"# epilogue: {self.epilogue.name}")
        header.lines(["import math", "", "import triton", "import triton.language as tl", "", ""])
        source = header.getvalue() + PartialRender(body, self.hooks).finalize()
        context = GridContext(self.output, inputs, meta, self.device)
        grid = tuple(int(g) for g in self.template.grid_rule(context))
        after = tuple(
            dataclasses.replace(launch, kernel_name=f"{self.kernel_name}_{launch.kernel_name}")
            for launch in self.launches
        )
        return RenderedKernel(source, self.kernel_name, self._parameters(), self.output, grid, after)

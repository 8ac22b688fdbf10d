"""`kernelpick.template`: a `TritonTemplate` rendered per config and signature, as choices."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from kernelpick.bench.inputs import Example
from kernelpick.codegen import CodeBuffer
from kernelpick.compile.launch import fixed_launcher
from kernelpick.compile.precompile import CompileJob, CompileOutcome, classify
from kernelpick.config import Config
from kernelpick.engine.choice import Choice, ConfigSource, configs_for, short_hash
from kernelpick.engine.modules import load_module, write_module
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError, TemplateError
from kernelpick.select.render import Epilogue
from kernelpick.select.template import RenderedKernel, TritonTemplate
from kernelpick.tensors import TensorSpec

EpilogueSource = Epilogue | Callable[[Signature], Epilogue | None] | None
ConstantSource = Mapping[str, Any] | Callable[[Signature], Mapping[str, Any]] | None


class TemplateChoices:
    """A `TritonTemplate` as choices (`kernelpick.template`): rendered per config and input signature,
    written to the cache, imported; expands to one rendered `TemplateChoice` per config.

    Args:
        template: the template.
        configs: `kernelpick.Config`/`triton.Config` objects whose meta-parameters are rendered into
            the source, or a function of the `Signature` returning them (a shape-aware space).
        epilogue: an `Epilogue` applied before the store (e.g. bias + activation), or a function of
            the `Signature` returning one or None.
        arguments: names of the operation's positional inputs, in order (default: the template's
            inputs); the template's and the epilogue's inputs are looked up among them.
        constants: more `tl.constexpr` values for the source (or a function of the `Signature`).
        static_shapes: bake sizes and strides into the source as constants (the default); False
            passes them as arguments, so one rendered kernel serves many sizes.
        name: its name in tables (default: the template's name).

    Raises:
        ConfigError: `template` is not a `TritonTemplate`, or reads inputs missing from `arguments`.
    """

    def __init__(
        self,
        template: TritonTemplate,
        *,
        configs: ConfigSource,
        epilogue: EpilogueSource = None,
        arguments: Sequence[str] | None = None,
        constants: ConstantSource = None,
        static_shapes: bool = True,
        name: str | None = None,
    ) -> None:
        if not isinstance(template, TritonTemplate):
            raise ConfigError(
                f"kernelpick.template expects a kernelpick.TritonTemplate, got {type(template).__name__}"
            )
        self.template = template
        self.requires = template.requires  # checked by the selector (kernelpick.engine.eligibility)
        self.configs, self.epilogue = configs, epilogue
        self.arguments = tuple(arguments) if arguments is not None else template.inputs
        unknown = [n for n in template.inputs if n not in self.arguments]
        if unknown:
            raise ConfigError(
                f"template `{template.name}` reads inputs {unknown}, which are not among the operation's "
                f"arguments {list(self.arguments)}: name every positional input in `arguments`"
            )
        self.constants, self.static_shapes = constants, static_shapes
        self.name = name or template.name

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        return [self._render(signature, raw) for raw in configs_for(self.configs, signature)]

    def choice_for(self, signature: Signature, description: Mapping[str, Any]) -> Choice | None:
        """The one choice of this space that `description` (a stored or tabled choice's) names, rendered
        alone: binding a tabled pick renders no other config. None when it names none of them."""
        if description.get("kind") == "template" and description.get("template") == self.template.name:
            for raw in configs_for(self.configs, signature):
                if Config.of(raw).to_data() == description.get("config"):
                    return self._render(signature, raw)
        return None

    def _render(self, signature: Signature, raw: Any) -> Choice:
        """The choice of one config for `signature`: rendered, or unavailable with the reason."""
        if len(signature.inputs) != len(self.arguments):
            raise ConfigError(
                f"template choice `{self.name}` takes {len(self.arguments)} inputs "
                f"({', '.join(self.arguments)}), the call gave {len(signature.inputs)}"
            )
        inputs = {n: v for n, v in zip(self.arguments, signature.inputs) if isinstance(v, TensorSpec)}
        epilogue = self.epilogue(signature) if callable(self.epilogue) else self.epilogue
        constants = self.constants(signature) if callable(self.constants) else self.constants
        out = signature.named_kwargs.get("out")
        config = Config.of(raw)
        label = f"{self.name}[{epilogue.name}]" if epilogue is not None else self.name
        name = f"{label} {config}"
        try:
            rendered = self.template.prepare(
                config,
                inputs,
                epilogue,
                device=signature.device,
                output=out if isinstance(out, TensorSpec) else None,
                constants=constants,
                static_shapes=self.static_shapes,
            )
        except (TemplateError, ValueError) as error:
            digest = short_hash("template-failed", self.template.source_hash, config.identity, str(signature))
            return UnavailableChoice(name, digest, "compile_error", str(error))
        return TemplateChoice(self, name, config, rendered, epilogue)

    def __repr__(self) -> str:
        return f"template({self.template.name})"


#: `kernelpick.template(...)`: the public name of a template's config space (the class documents its arguments).
template = TemplateChoices


class UnavailableChoice:
    """A choice that could not even be built (its template failed to render); recorded, never run."""

    compiles_without_user_code = True

    def __init__(self, name: str, digest: str, status: Any, message: str) -> None:
        self.name, self.digest, self.status, self.message = name, digest, status, message

    def description(self) -> dict[str, Any]:
        return {"kind": "unavailable", "name": self.name, "reason": self.message}

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        return CompileOutcome(self.status, self.message)

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        raise TemplateError(f"choice `{self.name}` cannot run: {self.message}")


class TemplateChoice:
    """One config of a template, rendered for one signature."""

    compiles_without_user_code = True  # its binding is generated, not the user's

    def __init__(
        self,
        space: TemplateChoices,
        name: str,
        config: Config,
        rendered: RenderedKernel,
        epilogue: Epilogue | None,
    ) -> None:
        self.space, self.name, self.config = space, name, config
        self.rendered, self.epilogue = rendered, epilogue
        self.launch_config = Config({}, **config.options())
        self.digest = short_hash("template", rendered.digest, self.launch_config.identity)

    def description(self) -> dict[str, Any]:
        return {
            "kind": "template",
            "name": self.name,
            "template": self.space.template.name,
            "config": self.config.to_data(),
            "epilogue": None if self.epilogue is None else self.epilogue.expression,
            "source_sha256": self.rendered.digest,
        }

    def kernels(self) -> list[tuple[Any, Config, tuple[int, ...]]]:
        """Every kernel one call launches, in order (`RenderedKernel.after`), with its launch options and
        grid: `triton.jit` kernels of the rendered module, written to the cache and imported from there."""
        module = load_module(write_module(self.rendered.source))
        found = [(getattr(module, self.rendered.kernel_name), self.launch_config, self.rendered.grid)]
        for launch in self.rendered.after:
            options = Config(
                {},
                num_warps=launch.num_warps if launch.num_warps is not None else self.config.num_warps,
                num_stages=launch.num_stages if launch.num_stages is not None else self.config.num_stages,
            )
            found.append((getattr(module, launch.kernel_name), options, launch.grid))
        return found

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        try:
            kernels = self.kernels()
            arguments = _generate(self, kernels, signature)[1]
            args, _ = arguments(*example.args, **example.kwargs)
        except Exception as error:
            return CompileOutcome(*classify(error))
        (kernel, options, grid), *later = kernels
        companions = tuple(CompileJob(k, args, {}, o, g) for k, o, g in later)
        return CompileJob(kernel, args, {}, options, grid, companions)

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        return _generate(self, self.kernels(), signature)[0]

    def traced_call(self, signature: Signature) -> Callable[..., Any] | None:
        """`callable_for`'s function with each launch through `wrap_triton`, for a compiled graph to hold
        (`traceable_pick`); None for a template that takes tensor descriptors or writes to a given `out`."""
        if "out" in signature.named_kwargs or any(p.kind == "descriptor" for p in self.rendered.parameters):
            return None
        return _generate(self, self.kernels(), signature, _traced_launcher)[0]


def wrap_triton_launch(
    kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: dict[str, Any]
) -> Any:
    """`kernel[grid](*args, **kwargs)` as a tracer records it (`torch.library.wrap_triton`), launch
    `options` (num_warps, ...) under a one-config `triton.autotune`, as Dynamo wraps a launch given them."""
    if options:
        import triton

        kernel = triton.autotune([triton.Config({}, **options)], key=[])(kernel)
    return torch.library.wrap_triton(kernel)[grid](*args, **kwargs)


def _traced_launcher(kernel: Any, interpreter: bool, gpu: int | None) -> Callable[..., Any]:
    """A launch a tracer records as `wrap_triton`'s (`wrap_triton_launch`; Inductor's code sets the device)."""
    return lambda *args, grid, **options: wrap_triton_launch(kernel, grid, args, {}, options)


def _generate(
    choice: TemplateChoice,
    kernels: Sequence[tuple[Any, Config, tuple[int, ...]]],
    signature: Signature,
    make_launcher: Callable[[Any, bool, int | None], Callable[..., Any]] = fixed_launcher,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Write and compile `call(*inputs, **kwargs)` and `arguments(*inputs, **kwargs)` for one signature:
    `kernels` are what `TemplateChoice.kernels` gives, each launched by `make_launcher(kernel,
    interpreted, gpu_index)`'s function, on the signature's GPU whatever the current device."""
    rendered = choice.rendered
    position = {name: index for index, name in enumerate(choice.space.arguments)}
    scope: dict[str, Any] = {
        "empty": torch.empty,
        "FLOAT32": torch.float32,
        "empty_strided": torch.empty_strided,
        "OUT_SIZE": rendered.output.size,
        "OUT_STRIDE": rendered.output.stride,
        "OUT_DTYPE": rendered.output.dtype,
        # The signature's device, not the rendered output's: a worker measures on its own GPU, whose
        # index there (0) need not be the caller's (cuda:1 in rank 1 of a job, say).
        "DEVICE": signature.device.torch_device,
        "STAND_IN": torch.device("meta"),
    }
    values = []
    for parameter in rendered.parameters:
        if parameter.kind == "tensor":
            values.append(f"inputs[{position[parameter.source]}]")
        elif parameter.kind == "output":
            values.append("out")
        elif parameter.kind == "descriptor":
            from triton.tools.tensor_descriptor import TensorDescriptor

            scope["TensorDescriptor"] = TensorDescriptor
            layout = (parameter.shape, parameter.strides, parameter.block)
            scope[f"{parameter.name}_layout"] = tuple(list(part) for part in layout)
            values.append(f"TensorDescriptor(inputs[{position[parameter.source]}], *{parameter.name}_layout)")
        elif parameter.kind == "workspace":
            values.append(f"workspace_{parameter.name}")
        else:
            values.append(str(parameter.value))

    def allocate(device: str) -> list[str]:
        out = f"out = empty_strided(OUT_SIZE, OUT_STRIDE, dtype=OUT_DTYPE, device={device})"
        if "out" in signature.named_kwargs:
            out = 'out = kwargs["out"]'
        # Scratch space comes from torch's caching allocator, as the output does: no zeroing, no copy.
        return [out] + [
            f"workspace_{p.name} = empty({p.shape!r}, dtype=FLOAT32, device={device})"
            for p in rendered.parameters
            if p.kind == "workspace"
        ]

    launches = []
    gpu = signature.device.index if signature.device.type == "cuda" else None
    for index, (kernel, config, grid) in enumerate(kernels):
        scope[f"launch_{index}"] = make_launcher(kernel, signature.device.interpreter, gpu)
        scope[f"GRID_{index}"] = grid
        options = ", ".join(f"{k}={v!r}" for k, v in config.options().items() if v is not None)
        launches.append(f"launch_{index}({', '.join(values)}, grid=GRID_{index}, {options})")
    code = CodeBuffer()
    code.line("def call(*inputs, **kwargs):")
    with code.indent():
        code.lines(allocate("DEVICE"))
        code.lines(launches)
        code.line("return out")
    code.line("")
    # Compiling needs the arguments' kinds, dtypes and alignment, not their memory: the output and
    # scratch space are meta tensors (address 0, as aligned as any allocation), so compiling every
    # choice of a large product at once holds no output of any.
    code.line("def arguments(*inputs, **kwargs):")
    with code.indent():
        code.lines(allocate("STAND_IN"))
        code.line(f"return ({', '.join(values)},), out")
    filename = f"<kernelpick caller of {rendered.kernel_name}>"
    exec(compile(code.getvalue(), filename, "exec"), scope)  # our own generated code, never stored data
    return scope["call"], scope["arguments"]

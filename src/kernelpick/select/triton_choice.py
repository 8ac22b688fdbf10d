"""`kernelpick.triton_choice`: a hand-written `triton.jit` kernel and its configs, as choices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from triton.runtime.jit import JITFunction

from kernelpick.bench.inputs import ExampleInputs
from kernelpick.compile.launch import launcher
from kernelpick.compile.precompile import CompileJob, CompileOutcome, classify
from kernelpick.compile.twins import compilable
from kernelpick.compile.unwrap import innermost
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.select.choice import (
    Choice,
    ConfigSource,
    NamedChoice,
    bound_arguments,
    configs_for,
    qualified_name,
    short_hash,
)
from kernelpick.select.modules import keep_kernel_source
from kernelpick.select.signature import Signature

Bind = Callable[..., tuple[Any, Any]]


def _jit_function(kernel: Any) -> JITFunction[Any]:
    inner = compilable(innermost(kernel))  # inside wrappers; under TRITON_INTERPRET=1, the compilable twin
    if not isinstance(inner, JITFunction):
        raise ConfigError(
            f"kernelpick.triton_choice expects a @triton.jit kernel, got {type(kernel).__name__}; "
            "for any other callable use kernelpick.extern"
        )
    return inner


class TritonKernelChoices:
    """A Triton kernel's config space; expands to one `TritonKernelChoice` per config (see `triton_choice`)."""

    def __init__(
        self, kernel: Any, *, grid: Any, configs: ConfigSource, bind: Bind, name: str | None = None
    ) -> None:
        self.kernel = kernel
        self.jit = _jit_function(kernel)
        if not callable(bind):
            raise ConfigError(f"triton_choice(bind=...) must be a function, got {type(bind).__name__}")
        self.grid = grid
        self.configs = configs
        self.bind = bind
        self._name = name or self.jit.__name__

    @property
    def name(self) -> str:
        return self._name

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        configs = [Config.of(c) for c in configs_for(self.configs, signature)] or [Config({})]
        return [TritonKernelChoice(self, config) for config in configs]

    def __repr__(self) -> str:
        return f"triton_choice({self._name})"


class TritonKernelChoice(NamedChoice):
    """One config of a Triton kernel."""

    def __init__(self, space: TritonKernelChoices, config: Config) -> None:
        self.space = space
        self.config = config
        self._name = f"{space.name} {config}" if str(config) else space.name
        # JITFunction.cache_key hashes the kernel's source and the @triton.jit helpers it calls; the
        # same kernel bound to the inputs another way is another implementation.
        self._digest = short_hash("triton", space.jit.cache_key, qualified_name(space.bind), config.identity)

    def description(self) -> dict[str, Any]:
        return {
            "kind": "triton",
            "name": self._name,
            "kernel": self.space.name,
            "config": self.config.to_data(),
            "source": self.space.jit.cache_key,  # its kept source: `kernelpick code`
        }

    def compile_job(self, example: ExampleInputs, signature: Signature) -> CompileJob | CompileOutcome:
        keep_kernel_source(self.space.jit)
        try:
            args, kwargs, _ = bound_arguments(
                self.space.bind(*example.args, **example.kwargs), f"triton_choice {self.space.name}"
            )
        except Exception as error:
            status, message = classify(error)
            return CompileOutcome(status, f"bind raised {message}")
        return CompileJob(self.space.kernel, args, kwargs, self.config, self.space.grid)

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        launch = launcher(self.space.kernel, signature.device.interpreter)
        bind, grid, meta = self.space.bind, self.space.grid, dict(self.config.all_kwargs())
        where = f"triton_choice {self.space.name}"

        def call(*inputs: Any, **kwargs: Any) -> Any:
            result = bind(*inputs, **kwargs)
            if type(result) is tuple and len(result) == 2 and type(result[0]) is tuple:
                launch(*result[0], grid=grid, **meta)
                return result[1]
            args, named, output = bound_arguments(result, where)
            launch(*args, grid=grid, **named, **meta)
            return output

        return call


def triton_choice(
    kernel: Any, *, grid: Any, configs: ConfigSource, bind: Bind, name: str | None = None
) -> TritonKernelChoices:
    """A `triton.jit` kernel and its config space, as choices of a selector.

    Args:
        kernel: a `@triton.jit` function (possibly under `triton.heuristics`).
        grid: the launch grid: a tuple, or `grid(meta) -> tuple` as in Triton (`meta` holds the
            kernel's arguments by name and the config's meta-parameters).
        configs: `triton.Config` or `kernelpick.Config` objects, or a function of the `Signature`
            returning them (a shape-aware space).
        bind: `bind(*inputs, **kwargs) -> (kernel_arguments, output)`: maps the operation's inputs to
            the kernel's arguments (a tuple, or a dict by name, without the config's meta-parameters)
            and allocates the output it returns. It runs on every call.
        name: its name in tables (default: the kernel's name).

    Raises:
        ConfigError: `kernel` is not a Triton kernel or `bind` is not callable.
    """
    return TritonKernelChoices(kernel, grid=grid, configs=configs, bind=bind, name=name)

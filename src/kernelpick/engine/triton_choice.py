"""A `triton.jit` kernel's configs as choices: a selector's `triton_choice`, an autotuned kernel's call."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from triton.runtime.jit import JITFunction

from kernelpick.analysis import analyze
from kernelpick.bench.inputs import Example, tensor_of
from kernelpick.bench.measure import Hooks
from kernelpick.compile.launch import KernelLaunch, launcher, runner
from kernelpick.compile.precompile import CompileJob, CompileOutcome, classify
from kernelpick.compile.twins import compilable
from kernelpick.compile.unwrap import innermost
from kernelpick.config import Config
from kernelpick.console import warn_once
from kernelpick.engine.choice import (
    Choice,
    ConfigSource,
    bound_arguments,
    compile_choices,
    configs_for,
    function_identity,
    short_hash,
)
from kernelpick.engine.modules import keep_kernel_source
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError, IsolationError, failure_exception
from kernelpick.tensors import holds_descriptor, own_descriptors

log = logging.getLogger("kernelpick.tune")

Bind = Callable[..., tuple[Any, Any]]


class TritonKernelChoices:
    """A `triton.jit` kernel and its config space, as choices of a selector (`kernelpick.triton_choice`);
    expands to one `TritonKernelChoice` per config.

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

    def __init__(
        self, kernel: Any, *, grid: Any, configs: ConfigSource, bind: Bind, name: str | None = None
    ) -> None:
        self.kernel = kernel
        # Inside wrappers; under TRITON_INTERPRET=1, the compilable twin.
        self.jit: JITFunction[Any] = compilable(innermost(kernel))
        if not isinstance(self.jit, JITFunction):
            raise ConfigError(
                f"kernelpick.triton_choice expects a @triton.jit kernel, got {type(kernel).__name__}; "
                "for any other callable use kernelpick.extern"
            )
        if not callable(bind):
            raise ConfigError(f"triton_choice(bind=...) must be a function, got {type(bind).__name__}")
        self.grid, self.configs, self.bind = grid, configs, bind
        self.name = name or self.jit.__name__

    def choices_for(self, signature: Signature) -> Sequence[Choice]:
        configs = [Config.of(c) for c in configs_for(self.configs, signature)] or [Config({})]
        return [TritonKernelChoice(self, config) for config in configs]

    def __repr__(self) -> str:
        return f"triton_choice({self.name})"


class TritonKernelChoice:
    """One config of a Triton kernel."""

    def __init__(self, space: TritonKernelChoices, config: Config) -> None:
        self.space = space
        self.config = config
        self.name = f"{space.name} {config}" if str(config) else space.name
        # JITFunction.cache_key hashes the kernel's source and the @triton.jit helpers it calls; the
        # same kernel bound to the inputs another way, or launched on another grid, is another choice.
        grid = function_identity(space.grid) if callable(space.grid) else repr(space.grid)
        self.digest = short_hash(
            "triton", space.jit.cache_key, function_identity(space.bind), grid, config.identity
        )

    def description(self) -> dict[str, Any]:
        return {
            "kind": "triton",
            "name": self.name,
            "kernel": self.space.name,
            "config": self.config.to_data(),
            "source": self.space.jit.cache_key,  # its kept source: `kernelpick code`
        }

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
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


#: `kernelpick.triton_choice(...)`: a Triton kernel's config space (the class documents its arguments).
triton_choice = TritonKernelChoices


_WRITES_ELSEWHERE = (
    "kernel `%s` %s. Tuning keeps copies of its arguments, not of the memory they point to, so every "
    "config's runs write that memory too, not the call's one launch alone (as triton.autotune's do). "
    "Tune it first on scratch tensors of the call's sizes (its pick is kept per key), or restore that "
    "memory in a config's pre_hook"
)


@dataclass(frozen=True, slots=True)
class OwnArguments:
    """One config's own launch arguments (`KernelCall.own_arguments`), and what its hooks are given."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    named: dict[str, Any]


@dataclass
class KernelCall:
    """One call of an autotuned kernel, which its configs are measured on, with the options
    `kernelpick.autotune` was given. `analyzed`: the tuned kernel, for the access analysis."""

    name: str
    fn: Any
    arg_names: Sequence[str]
    analyzed: Any
    grid: Any
    configs: Sequence[Config] = ()
    reset_to_zero: Sequence[str] = ()
    restore_value: Sequence[str] = ()
    pre_hook: Callable[..., object] | None = None
    post_hook: Callable[..., object] | None = None
    workers: int | None = None

    def choices(self, configs: Sequence[Config]) -> list[ConfigChoice]:
        return [ConfigChoice(self, config) for config in configs]

    def runs_here(self) -> str | None:
        """Why the configs are timed in the caller's process even when isolated (None: they need not be)."""
        if self.pre_hook is not None or self.post_hook is not None or any(c.pre_hook for c in self.configs):
            return "its hooks are your code, which runs in your process, as Triton runs it"
        return None

    def hooks_before_compiling(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether each config's pre-hooks must run before it is compiled: when the arguments hold a
        tensor descriptor, whose block shape such hooks set from the config (Triton's TMA kernels pass
        a placeholder); no other argument a hook changes alters what Triton compiles."""
        hooked = self.pre_hook is not None or any(c.pre_hook for c in self.configs)
        return hooked and holds_descriptor([*args, *kwargs.values()])

    def warm_up(
        self, configs: Sequence[Config], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[CompileOutcome]:
        """Compile `configs` for this call without running any (on their own arguments, hooks run,
        where `hooks_before_compiling`)."""
        choices = self.choices(configs)
        if self.hooks_before_compiling(args, kwargs):
            choices = self.own_choices(choices, args, kwargs)[1]
        signature = Signature.of(args, kwargs)
        return compile_choices(choices, Example(args, kwargs, written=()), signature, workers=self.workers)

    def compiled(
        self,
        choices: Sequence[ConfigChoice],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        compile: Callable[..., list[CompileOutcome]],
        phases: dict[str, float],
    ) -> tuple[list[ConfigChoice], Example, list[CompileOutcome]]:
        """`choices` compiled by `compile(choices, example, phases, meanwhile=)` on the real arguments
        (compiling launches nothing), and the example they are timed on: copies of what the access
        analysis, run while the compilers work, says the kernel may write. Where pre-hooks must run
        before compiling, every tensor is copied first (hooks may write any argument) and each config
        compiled and timed on its own arguments (`own_arguments`)."""
        started = time.perf_counter()
        given = Example(args, kwargs, written=())  # nothing copied: compiling launches nothing
        if self.hooks_before_compiling(args, kwargs):
            example, own = self.own_choices(choices, args, kwargs)
            phases["copy_inputs"] = time.perf_counter() - started
            return own, example, compile(own, given, phases)
        keeping: list[dict[str, Any]] = []  # the analysis runs while the compilers work
        outcomes = compile(
            list(choices), given, phases, meanwhile=lambda: keeping.append(self.keeping(args, kwargs, phases))
        )
        started = time.perf_counter()
        example = Example(args, kwargs, **keeping[0])
        phases["copy_inputs"] = time.perf_counter() - started
        return list(choices), example, outcomes

    def own_choices(
        self, choices: Sequence[ConfigChoice], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[Example, list[ConfigChoice]]:
        """Copies of every tensor, and each of `choices` on its own arguments over them."""
        example = Example(args, kwargs, **self.restoring(self.tensor_names(args, kwargs), None))
        return example, [ConfigChoice(self, c.config, self.own_arguments(c.config, example)) for c in choices]

    def own_arguments(self, config: Config, example: Example) -> OwnArguments:
        """`config`'s own arguments: the example's with copies of the tensor descriptors, given to the
        config's pre_hook and then the tuner's (Triton's order)."""
        named = own_descriptors(example.named)
        given = {**named, **config.all_kwargs()}  # Triton's `full_nargs`
        for hook in (config.pre_hook, self.pre_hook):
            if hook is not None:
                hook(given)
        positional = self.arg_names[: len(example.args)]
        return OwnArguments(tuple(named[n] for n in positional), {n: named[n] for n in example.kwargs}, given)

    def accesses(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        """Which arguments the kernel may write, and which it may read (None: all), from the access
        analysis; every tensor when it is unsure. `restore_value` arguments count as both."""
        try:
            access = analyze(self.analyzed, *args, **kwargs)
        except Exception as error:  # copies of every tensor are safe; the launch says what is wrong
            log.debug("no access analysis for %s: %s", self.name, error)
            access = None
        if access is not None and access.writes_elsewhere:
            warn_once(
                log, f"writes elsewhere: {self.name}", _WRITES_ELSEWHERE, self.name, access.writes_elsewhere
            )
        if access is None or not access.certain:
            if access is not None:
                log.info("%s: benchmarking on copies of every tensor: %s", self.name, access.reason)
            written, read = self.tensor_names(args, kwargs), None  # tensor descriptors too
        else:
            written, read = list(access.mutated), [*access.read, *self.restore_value]
        return sorted({*written, *self.restore_value}, key=self.arg_names.index), read

    def tensor_names(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[str]:
        """The arguments that are tensors or hold one (a tensor descriptor), in the kernel's order."""
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        return [n for n in self.arg_names if n in named and tensor_of(named[n]) is not None]

    def restoring(self, written: Sequence[str], read: Sequence[str] | None) -> dict[str, Any]:
        """How the configs' arguments are kept between runs (`Example`'s options): copies of those
        `written`, those `read` among them restored and `reset_to_zero` ones zeroed before every run."""
        return {
            "names": tuple(self.arg_names),
            "written": tuple(written),
            "zeroed": tuple(self.reset_to_zero),
            "read": None if read is None else tuple(read),
            "restore_always": True,
        }

    def keeping(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], phases: dict[str, float]
    ) -> dict[str, Any]:
        """`restoring` what the access analysis says the kernel may write and read, timed as "analysis"."""
        started = time.perf_counter()
        written, read = self.accesses(args, kwargs)
        phases["analysis"] = time.perf_counter() - started
        return self.restoring(written, read)


def _launch_on(launch: Callable[..., Any], own: OwnArguments, *_example: Any, **_keywords: Any) -> Any:
    """`launch` on a config's own arguments, whatever the example's: the same tensors, its own descriptors."""
    return launch(*own.args, **own.kwargs)


class ConfigChoice:
    """One config of an autotuned kernel's call (`space`), as a choice launched on the call's own
    arguments (`own`: its own copies, where its hooks run before it compiles); its digest is the config's."""

    compiles_without_user_code = True

    def __init__(self, call: KernelCall, config: Config, own: OwnArguments | None = None) -> None:
        self.space, self.config, self.own = call, config, own
        self.name, self.digest = str(config), config.digest

    def description(self) -> dict[str, Any]:
        return self.config.to_dict()

    def compile_job(self, example: Example, signature: Signature) -> CompileJob | CompileOutcome:
        given = example if self.own is None else self.own
        return CompileJob(self.space.fn, given.args, given.kwargs, self.config, self.space.grid)

    def callable_for(self, signature: Signature) -> Callable[..., Any]:
        run = runner(self.space.fn, signature.device.interpreter)
        launch = functools.partial(run, grid=self.space.grid, warmup=False, **self.config.all_kwargs())
        return launch if self.own is None else functools.partial(_launch_on, launch, self.own)

    def hooks(self, example: Example) -> Hooks | None:
        """The user's hooks around each run (a config's pre_hook first, as in Triton), given the
        example's arguments by name (or its own)."""
        before = tuple(hook for hook in (self.config.pre_hook, self.space.pre_hook) if hook is not None)
        if not before and self.space.post_hook is None:
            return None
        named = example.named if self.own is None else self.own.named
        return Hooks(before, self.space.post_hook, {**named, **self.config.all_kwargs()})

    def failed_to_compile(self, outcome: CompileOutcome, hooks: Hooks | None) -> None:
        """Run the hooks as a Triton launch that fails to compile does: the pre-hooks (unless they ran
        before compiling), then the post_hook with Triton's exception."""
        if hooks is not None:
            error = failure_exception(outcome.status, outcome.message)
            hooks.failed_before_running(error, before_ran=self.own is not None)

    def portable(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> KernelLaunch:
        """This config as a worker gets it: its meta-parameters and grid as numbers (the kernel crosses
        once, with the problem).

        Raises:
            IsolationError: the grid function failed (it needs values Triton adds itself).
        """
        grid = self.space.grid
        named = {**dict(zip(self.space.arg_names, args)), **kwargs}
        try:
            value = grid({**named, **self.config.kwargs}) if callable(grid) else grid
        except Exception as error:
            raise IsolationError(f"the grid could not be evaluated outside a launch: {error}") from error
        return KernelLaunch(self.name, dict(self.config.all_kwargs()), tuple(int(n) for n in value))

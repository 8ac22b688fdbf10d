"""`kernelpick.autotune`: a drop-in for `triton.autotune` that compiles in parallel and remembers."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import triton
from triton.runtime.jit import KernelInterface

from kernelpick import settings
from kernelpick.bench.benchmarker import MEASUREMENT_VERSION
from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import Timer, UserBenchTimer
from kernelpick.calls import record_kernel_call
from kernelpick.compile.launch import check_launch_arguments, runner
from kernelpick.compile.twins import compilable
from kernelpick.compile.unwrap import innermost
from kernelpick.config import Config, default_config
from kernelpick.device import DeviceInfo, describe, device_of, warn_once_if_interpreted
from kernelpick.engine.choice_measuring import ChoiceMeasuring
from kernelpick.engine.modules import keep_kernel_source
from kernelpick.engine.record import TuningRecord, failure_report, report_tuning
from kernelpick.engine.signature import Signature, holds_tensor
from kernelpick.engine.triton_choice import KernelCall
from kernelpick.engine.tuning import Tuning, result_store
from kernelpick.errors import ArgumentError, ConfigError, NoValidConfigs, no_valid_configs
from kernelpick.search.registry import strategy_class
from kernelpick.search.run import SearchTrace
from kernelpick.search.space import Space
from kernelpick.search.spec import SearchArgument
from kernelpick.store import ResultStore, TuningKey
from kernelpick.store.base import UnreadStore
from kernelpick.tune.background import provisional_entry
from kernelpick.tune.dispatch import MISSES, Dispatcher, Entry, describe_key, specialized_arguments
from kernelpick.tune.first_launch import FirstLaunch
from kernelpick.workers.plan import start_early

log = logging.getLogger("kernelpick.tune")


def autotune(
    configs: Sequence[Any],
    key: Sequence[str],
    *,
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    pre_hook: Callable[..., object] | None = None,
    post_hook: Callable[..., object] | None = None,
    do_bench: Callable[..., Any] | None = None,
    cache: bool = True,
    workers: int | None = None,
    store: ResultStore | None = None,
    isolate: bool | None = None,
    warmup: float | None = None,
    rep: float | None = None,
    use_cuda_graph: bool = False,
    cache_results: bool = False,
    default: Any = None,
    search: SearchArgument | None = None,
    background: bool | None = None,
) -> Callable[[Any], Autotuner]:
    """Tune a Triton kernel over `configs`, once per distinct value of `key`; a drop-in for `triton.autotune`.

    Args:
        configs: `triton.Config` or `kernelpick.Config` objects, or a `kernelpick.Space` (its
            configs that fit the device tuned on).
        key: names of arguments whose values select a tuning (argument dtypes are always part of it).
        prune_configs_by: as in Triton: `early_config_prune(configs, named_args, **kwargs)`,
            `perf_model(**named_args, **kwargs, **config)` and `top_k`.
        reset_to_zero: arguments zeroed before each benchmark run (honoured, though not needed for
            correctness: benchmarks run on copies of what the kernel may write).
        restore_value: arguments restored before each benchmark run (likewise).
        pre_hook: called with the named arguments before each benchmark run, outside the timing.
        post_hook: called with the named arguments and `exception=None` after each benchmark run.
        do_bench: a Triton-style `do_bench(kernel_call, quantiles)` to time with instead of kernelpick's timer.
        cache: remember results in the result store across processes (also `KERNELPICK_CACHE`).
        workers: configs compiled at once (default: `KERNELPICK_COMPILE_WORKERS`, else one per CPU core).
        store: where to remember results (default: the SQLite store under `KERNELPICK_CACHE_DIR`).
        isolate: benchmark in worker processes, one per GPU, that a config crashing, hanging or
            breaking its CUDA context cannot take down (default: `KERNELPICK_ISOLATE`, on with a GPU).
            The kernel must be importable: bound to a module-level name.
        warmup: warm-up milliseconds per config (Triton's deprecated argument; default from settings).
        rep: timed milliseconds per config (likewise).
        use_cuda_graph: time with `triton.testing.do_bench_cudagraph`.
        cache_results: accepted for compatibility; kernelpick always caches when `cache` is True.
        default: the config to keep unless another beats it by more than the measured spread of the
            two (one of `configs`, or its index). Without it, the config that won the last tuning
            for the key, when new configs are measured beside stored ones, is kept likewise.
        search: how configs are searched: "exhaustive" (time them all), "random", "halving",
            "pattern" or "model", with options as "model(budget=0.1)" or {"name": "model", ...}
            (docs/search.md lists them; default: `KERNELPICK_SEARCH`; budgets: `KERNELPICK_SEARCH_BUDGET`,
            `KERNELPICK_SEARCH_SECONDS`). Every config timed is stored, so a later search starts warm.
        background: a new key's first calls run `default` (else the first config) while the configs
            are tuned in a thread (`kernelpick.tune.background`; default: `KERNELPICK_BACKGROUND`).

    Raises:
        ConfigError: at decoration, for names in `key`, `reset_to_zero` or `restore_value` that are
            not arguments of the kernel, for objects in `configs` that are not configs, or for a
            `default` that is not one of them.
    """
    arguments = dict(locals())  # every argument as given: the kernel decorated is tuned with them
    return lambda fn: Autotuner(fn, **arguments)


class Autotuner(KernelInterface[Any]):  # type: ignore[misc]  # Triton is untyped here
    """A tuned kernel: launch it as `kernel[grid](*args, **kwargs)`, like the kernel it wraps.

    After a call, `best_config` is the config it ran with, `configs_timings` the median milliseconds of
    each config for that call's key (both with the config objects as given: `triton.Config`s stay
    `triton.Config`s), `cache` the config picked for each key tuned in this process (clear it to
    tune again), and `last_tuning` the full `TuningRecord`.
    """

    def __init__(self, fn: Any, configs: Sequence[Any], key: Sequence[str], **options: Any) -> None:
        """`autotune(configs, key, **options)(fn)`: `autotune` says what each option does and gives the
        defaults of those left out (an option it does not take is a TypeError)."""
        bound = inspect.signature(autotune).bind(configs, key, **options)
        bound.apply_defaults()
        option = bound.arguments
        self.prune = Pruner.of(option["prune_configs_by"])
        # Triton's Autotuner's names for what it was given, for code written against triton.autotune.
        self.early_config_prune = self.prune.early_config_prune if self.prune is not None else None
        self.perf_model = self.prune.perf_model if self.prune is not None else None
        self.configs_top_k = self.prune.top_k if self.prune is not None else 1.0
        self.cache_results = bool(option["cache"])
        self.bench_time: float | None = None  # seconds of the last tuning, as Triton's
        reset_to_zero, restore_value = option["reset_to_zero"] or (), option["restore_value"] or ()
        self.fn = fn
        self.background = option["background"]
        self.base_fn = compilable(innermost(fn))  # under TRITON_INTERPRET=1, the kernel's compilable twin
        if not hasattr(self.base_fn, "arg_names"):
            raise ConfigError(f"kernelpick.autotune expects a @triton.jit function, got {type(fn).__name__}")
        self.arg_names: list[str] = list(self.base_fn.arg_names)
        self.name: str = getattr(self.base_fn, "__name__", repr(self.base_fn))
        for what, names in (("key", key), ("reset_to_zero", reset_to_zero), ("restore_value", restore_value)):
            if isinstance(names, str):
                raise ConfigError(f"{what} must be a list of argument names, got the string {names!r}")
            unknown = [n for n in names if n not in self.arg_names]
            if unknown:
                raise ConfigError(
                    f"{what} of kernel `{self.name}` names {', '.join(map(repr, unknown))}, which "
                    f"{'is not an argument' if len(unknown) == 1 else 'are not arguments'}; "
                    f"its arguments are {', '.join(self.arg_names)}"
                )
        self.space = configs if isinstance(configs, Space) else None
        search = option["search"]
        self.search = search if search is None else strategy_class(search).name  # checked now
        listed = self.space.configs() if self.space is not None else configs  # the device's limits: at tuning
        if not listed:
            raise ConfigError(
                f"kernel `{self.name}`: configs is empty; give at least one triton.Config (Triton would "
                "launch with no meta-parameters, num_warps=4 and num_stages=3; to tune nothing, give that one)"
            )
        self.configs: list[Config] = [Config.of(c) for c in listed]
        #: Each config as the user gave it (a `triton.Config`, say): what `best_config`, `cache` and
        #: `configs_timings` show and what `early_config_prune` receives, as in Triton.
        self.given: dict[Config, Any] = {}
        for original, config in zip(listed, self.configs):
            unknown = [name for name in config.kwargs if name not in self.arg_names]
            if unknown:
                raise ConfigError(
                    f"config {config} of kernel `{self.name}` sets {', '.join(f'`{n}`' for n in unknown)}, "
                    f"which the kernel has no parameter of (Triton: Keyword argument {unknown[0]} was "
                    f"specified but unrecognised); its parameters are {', '.join(self.arg_names)}"
                )
            self.given.setdefault(config, original)
        self.default = default_config(self.name, self.configs, option["default"])
        self.keys = list(key)
        self.reset_to_zero = list(reset_to_zero)
        self.restore_value = list(restore_value)
        self.pre_hook, self.post_hook = option["pre_hook"], option["post_hook"]
        self.timer: Timer | None = None
        self.num_warmups, self.num_reps = option["warmup"], option["rep"]  # milliseconds, as Triton's
        if option["do_bench"] is not None:
            self.timer = UserBenchTimer(option["do_bench"])
        elif option["use_cuda_graph"]:
            rep_ms = self.num_reps if self.num_reps is not None else 100
            self.timer = UserBenchTimer(functools.partial(triton.testing.do_bench_cudagraph, rep=rep_ms))
        self.use_store, self.store = option["cache"], option["store"]
        self.workers, self.isolate = option["workers"], option["isolate"]
        #: What was last timed in this process although isolation was wanted, with the reason: {name: why}.
        self.timed_here: dict[str, str] = {}
        tuned = {name for config in self.configs for name in config.kwargs}
        given = {p.name for p in self.base_fn.params if p.is_constexpr} - tuned
        # Key values and caller-given constexprs both select a tuning: a config tuned for one
        # constexpr value is not assumed best for another.
        key_positions = [
            (i, name) for i, name in enumerate(self.arg_names) if name in self.keys or name in given
        ]
        self._key_names = tuple(name for _, name in key_positions)
        # Where pre-hooks run, they set descriptors' block shapes from each config: not keyed.
        hooked = self.pre_hook is not None or any(c.pre_hook is not None for c in self.configs)
        specialized = specialized_arguments(self.base_fn.params, self._key_names)
        self._dispatch = Dispatcher(key_positions, specialized, blocks=not hooked)
        self._lock = threading.Lock()
        self.cache: dict[tuple[Any, ...], Any] = TunedCache(self._dispatch)
        self.tunings: dict[tuple[Any, ...], TuningRecord] = {}
        self._distrusted: set[tuple[Any, ...]] = set()  # keys whose stored pick failed: measured again
        self.last_tuning: TuningRecord | None = None
        self.best_config: Any = None
        self.configs_timings: dict[Any, float] = {}
        functools.update_wrapper(self, self.base_fn.fn)
        start_early(self.isolate)

    # -- the hot path -------------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid=grid, warmup=False)

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        dispatch = self._dispatch
        try:  # the fast path, every tuned call's: one generated function, one dict lookup
            entry = dispatch.fast[dispatch.fast_key(args, kwargs)]
        except MISSES:
            entry = None
        if entry is None:  # outside the except block: errors from tuning carry no unrelated context
            entry = self._slow_lookup(args, kwargs, grid)
        config, run, launch_kwargs = entry
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args)), **kwargs, **launch_kwargs})
        return run(*args, grid=grid, warmup=warmup, **kwargs, **launch_kwargs)

    def _slow_lookup(self, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> Entry:
        check_launch_arguments(self.name, self.arg_names, args, kwargs)
        key = self._dispatch.exact(args, kwargs)
        entry = self._dispatch.entries.get(key)
        if entry is None:
            named = self._named(args, kwargs)
            if tensors := [f"`{name}`" for name in self.keys if holds_tensor(named.get(name))]:
                raise ArgumentError(
                    f"kernel `{self.name}` is keyed on {' and '.join(tensors)}, a tensor: a key holds a "
                    "tensor by its identity, so every call would be tuned again (as triton.autotune "
                    "does); key on the sizes that select a config, e.g. an integer `n` argument"
                )
            current = settings.current()
            if current.record_path is not None:  # KERNELPICK_RECORD
                record_kernel_call(current.record_path, self, args, kwargs, key, grid)
            background = current.background if self.background is None else self.background
            entry = provisional_entry(self, key, args, kwargs, grid) if background else None
            if entry is None:
                with self._lock:  # tuned by another thread meanwhile, else now
                    entry = self._dispatch.entries.get(key) or self._tune(key, args, kwargs, grid)
        self._dispatch.remember(args, kwargs, entry)
        return entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"launch a tuned kernel with a grid: {self.name}[grid](...)")

    def __deepcopy__(self, memo: dict[int, Any]) -> Autotuner:
        """The kernel itself, as for a function: a copied model (`copy.deepcopy`) shares its picks."""
        return self

    # -- tuning -------------------------------------------------------------------------------
    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> list[Any]:
        """Compile every config for these arguments, in parallel, without running any."""
        device = describe(device_of(self._named(args, kwargs).values()))
        return self._call(grid).warm_up(self._configs_for(device, args, kwargs), args, kwargs)

    def _configs_for(
        self, device: DeviceInfo, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Config]:
        """The configs to tune on `device` (a `Space`'s that fit it, else those given), pruned."""
        configs = self.space.configs(device) if self.space is not None else self.configs
        if self.prune is None:
            return list(configs)
        return self.prune(configs, dict(zip(self.arg_names, args)), kwargs, self.given)

    def _named(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.arg_names):
            raise TypeError(f"kernel `{self.name}` takes {len(self.arg_names)} arguments, got {len(args)}")
        named = dict(zip(self.arg_names, args))
        named.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        return named

    def _tune(self, key: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> Entry:
        """Tune one key (under the lock, or on a background shadow): from a table, else from the store's
        results and what is measured now (`Tuning.settle`); remember the pick."""
        start = time.perf_counter()
        device = describe(device_of(self._named(args, kwargs).values()))
        warn_once_if_interpreted(device, self.name)
        for config in self.configs:
            conflicts = sorted(set(kwargs) & set(config.kwargs))
            if conflicts:
                raise ConfigError(
                    f"kernel `{self.name}` was given {', '.join(conflicts)} both by the call and by the "
                    f"config {config}; leave tuned meta-parameters out of the call"
                )
        configs = self._configs_for(device, args, kwargs)
        by_digest = {c.digest: c for c in configs}  # a tabled pick pruned away here is passed over
        store = result_store(self.use_store, self.store)
        if store is not None and key in self._distrusted:  # its stored pick failed here: not read
            store = UnreadStore(store)
        described = describe_key(self._key_names, key, dtypes=True)
        with Tuning(
            f"kernel `{self.name}`", described, self.tuning_key(key, device), store, device.name, start
        ) as tuning:
            results: Mapping[Config, BenchmarkResult] = {}
            searches: Mapping[str, SearchTrace] = {}
            timed_here: dict[str, str] = {}  # what was measured here although isolation was wanted, now
            note = ""
            if len(configs) == 1:  # nothing to choose between, nothing measured, as in Triton
                best, from_store = configs[0], False
                tuning.save({}, (), best.digest)
            elif key not in self._distrusted and (
                tabled := tuning.tabled(lambda e: by_digest.get(e.candidate), by_digest.keys)
            ):
                best, hit = tabled
                results, from_store, note = {best: hit.entry.result}, True, hit.note
            else:
                call = self._call(grid)
                timing = {"warmup_ms": self.num_warmups, "rep_ms": self.num_reps}  # the settings' where None
                measuring = ChoiceMeasuring(
                    self.name,
                    Signature.of(args, kwargs),
                    args,
                    kwargs,
                    timer=self.timer,
                    isolate=self.isolate,
                    reference_digest=None if self.default is None else self.default.digest,
                    kernel=call,
                    overrides={k: v for k, v in timing.items() if v is not None},
                    phases=tuning.phases,
                )
                choices = {c.digest: c for c in call.choices(configs)}
                settled = tuning.settle(choices, self.search, measuring, structure=self.space)
                reasons = list(measuring.timed_here.values())
                self.timed_here = timed_here = {self.name: reasons[0]} if reasons else {}
                results = {by_digest[d]: r for d, r in settled.results.items()}
                from_store = bool(results) and not settled.fresh
                if settled.fresh and tuning.store is not None:
                    keep_kernel_source(self.base_fn)  # for `kernelpick code`
                tuning.save(settled.results, settled.fresh, settled.pick)
                if settled.pick is None:
                    report = failure_report(
                        f"configs of kernel `{self.name}` failed for key {key[:-1]}",
                        [(str(c), r) for c, r in results.items()],
                        "fix the configs or the kernel; each reason above is what the compiler or the launch said",
                    )
                    raise no_valid_configs(report, results)
                best, note, searches = by_digest[settled.pick], settled.note, settled.searches
            record = TuningRecord.of_configs(
                self.name,
                key,
                device,
                results,
                best,
                tuning.seconds,
                from_store,
                key_text=describe_key(self._key_names, key),
                phases=tuning.phases,
                note=note,
                searches=searches,
                timed_here=dict(timed_here),
                key_names=self._key_names,
            )
            self._finish(key, record)
            if from_store:  # measured elsewhere, or forged: checked once (a distrusted key's store is unread)
                entry = FirstLaunch(self, key, tuning, best, device).wrapped
            else:
                entry = self._entry(best, device)
            self._dispatch.entries[key] = entry
            return entry

    def _entry(self, config: Config, device: DeviceInfo) -> Entry:
        return self.given.get(config, config), runner(self.fn, device.interpreter), dict(config.all_kwargs())

    def tuning_key(self, key: tuple[Any, ...], device: DeviceInfo) -> TuningKey:
        """The store key of one tuning: this kernel's source and the call's exact key (less its device)."""
        source = f"{MEASUREMENT_VERSION}:{self.base_fn.cache_key}"
        return TuningKey.make(self.name, source, device, key[:-1])

    def _call(self, grid: Any) -> KernelCall:
        """A call of this kernel, as its configs are measured on it (made at each use: an option, the
        timer say, may change after decoration)."""
        return KernelCall(
            self.name,
            self.fn,
            self.arg_names,
            self,
            grid,
            self.configs,
            reset_to_zero=self.reset_to_zero,
            restore_value=self.restore_value,
            pre_hook=self.pre_hook,
            post_hook=self.post_hook,
            workers=self.workers,
        )

    def accesses(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[list[str], list[str] | None]:
        """Which arguments the kernel may write, and which it may read (None: assume all); see
        `KernelCall.accesses`."""
        return self._call(None).accesses(args, kwargs)

    def _finish(self, key: tuple[Any, ...], record: TuningRecord) -> None:
        self._keep(key, record)
        report_tuning(record, table=len(record.results) > 1)
        log.info("tuned %s for %s in %.2f s: %s", self.name, key, record.seconds, record.best)
        if not record.results:  # as Triton: nothing is reported when a single config was left
            return
        # What `triton.knobs.autotuning` asks of a tuner: a printed line (`TRITON_PRINT_AUTOTUNING`)
        # and a call of its listener, where the installed Triton has one.
        knobs, best = triton.knobs.autotuning, self.cache[key]
        if knobs.print and not record.from_store:
            print(
                f"kernelpick autotuning for function {self.name},\nwith key as {key},\n"
                f"finished after {record.seconds:.2f}s,\nbest config selected: {best};"
            )
        listener = getattr(knobs, "listener", None)
        if listener is not None:
            listener(
                fn=self.base_fn,
                key=key,
                best_config=best,
                configs_timings=self.configs_timings,
                duration=None if record.from_store else record.seconds,
                cache_hit=record.from_store,
            )

    def _keep(self, key: tuple[Any, ...], record: TuningRecord) -> None:
        self.cache[key] = self.given.get(record.best, record.best)
        self.tunings[key] = self.last_tuning = record
        self.bench_time = record.seconds
        self.configs_timings = {self.given.get(c, c): r.median_ms for c, r in record.results.items()}


class TunedCache(dict[tuple[Any, ...], Any]):
    """`Autotuner.cache`: the config picked for each key tuned in this process. Clearing it makes
    the next call of each key tune again (read from the store, or measured), as in Triton."""

    def __init__(self, dispatch: Dispatcher) -> None:
        super().__init__()
        self._dispatch = dispatch

    def clear(self) -> None:
        super().clear()
        self._dispatch.clear()


#: Triton's words, which its own test checks word for word.
PRUNED_TO_NOTHING = (
    "Autotuner error: No valid autotuner configs after pruning. "
    "`early_config_prune` should return at least one config."
)


@dataclass(frozen=True, slots=True)
class Pruner:
    """`early_config_prune` drops configs by rule; `perf_model` ranks the rest and keeps `top_k`."""

    early_config_prune: Callable[..., Sequence[Any]] | None = None
    perf_model: Callable[..., float] | None = None
    top_k: int | float = 1.0

    @classmethod
    def of(cls, prune_configs_by: Mapping[str, Any] | None) -> Pruner | None:
        """Triton's `prune_configs_by` as a pruner; None where it prunes nothing."""
        if not prune_configs_by:
            return None
        unknown = set(prune_configs_by) - {"early_config_prune", "perf_model", "top_k"}
        if unknown:
            raise ConfigError(
                f"prune_configs_by has unknown entries {sorted(unknown)}; "
                "expected early_config_prune, perf_model and top_k"
            )
        top_k = prune_configs_by.get("top_k", 1.0)
        if isinstance(top_k, bool) or not isinstance(top_k, (int, float)) or top_k <= 0:
            raise ConfigError(
                f"prune_configs_by top_k must be a positive int or a fraction <= 1.0, got {top_k!r}"
            )
        early, model = prune_configs_by.get("early_config_prune"), prune_configs_by.get("perf_model")
        return None if early is None and model is None else cls(early, model, top_k)

    def __call__(
        self,
        configs: Sequence[Config],
        positional: Mapping[str, Any],
        kwargs: Mapping[str, Any],
        given: dict[Config, Any] | None = None,
    ) -> list[Config]:
        """The configs left to tune, as Triton prunes them: `positional` holds the positional arguments
        by name (Triton's `named_args`; arguments given by keyword are in `kwargs`), `given` each config
        as the user gave it, which is what `early_config_prune` receives and may return (configs it
        makes up are added).

        Raises:
            NoValidConfigs: `early_config_prune` kept no config.
        """
        pruned = list(configs)
        given = given if given is not None else {}
        if self.early_config_prune is not None:
            kept = self.early_config_prune([given.get(c, c) for c in pruned], dict(positional), **kwargs)
            pruned = []
            for original in kept:
                config = Config.of(original)
                given.setdefault(config, original)
                pruned.append(config)
            if not pruned:
                raise NoValidConfigs(PRUNED_TO_NOTHING)
        if self.perf_model is not None:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(pruned) * top_k))
            top_k = int(top_k)
            if len(pruned) > top_k:
                estimates = {c: self.perf_model(**{**positional, **kwargs, **c.all_kwargs()}) for c in pruned}
                pruned = sorted(pruned, key=estimates.__getitem__)[:top_k]
        return pruned

"""Every `KERNELPICK_*` variable declared once (type, default, meaning): read by `current()`."""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import difflib
import logging
import math
import os
import shutil
import sys
import tempfile
import threading
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from kernelpick.errors import CacheDirError, SettingsError

log = logging.getLogger("kernelpick.settings")

CompileMode = Literal["thread", "process"]
Toggle = Literal["auto", "on", "off"]
TimerName = Literal["auto", "cudagraph", "profiler", "events"]
#: The search strategies' names (kernelpick.search.registry.STRATEGIES holds their classes).
SearchName = Literal["exhaustive", "random", "halving", "pattern", "model"]
CompiledPicks = Literal["all", "library", "off"]
#: How a selection ranks its choices: as replayed from a CUDA graph, or launched with the host in the loop.
Measure = Literal["auto", "graph", "eager"]


def _setting(env: str, default: Any, doc: str) -> Any:
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective settings; each field is read from the environment variable named in its metadata."""

    cache_dir: Path | None = _setting(
        "KERNELPICK_CACHE_DIR",
        None,
        "Folder of the result store and rendered templates (default: the user cache dir).",
    )
    cache: bool = _setting("KERNELPICK_CACHE", True, "Remember tuning results across processes in the store.")
    print_tables: bool = _setting(
        "KERNELPICK_PRINT", False, "Print an AUTOTUNE table to stderr after each tuning."
    )
    progress: Toggle = _setting(
        "KERNELPICK_PROGRESS", "auto", "Progress bar for tuning over ~1 s: auto (on a terminal), on or off."
    )
    compile_workers: int = _setting(
        "KERNELPICK_COMPILE_WORKERS", 0, "Configs compiled at once; 0 means one per CPU core."
    )
    compile_mode: CompileMode = _setting(
        "KERNELPICK_COMPILE_MODE",
        "process",
        "Parallel compilation in forked processes (the faster on an H200) or threads (Triton's async mode).",
    )
    warmup_ms: float = _setting("KERNELPICK_WARMUP_MS", 1.0, "Warm-up time per config before it is timed.")
    rep_ms: float = _setting(
        "KERNELPICK_REP_MS", 10.0, "Timed runs per config in the first round, in milliseconds."
    )
    confirm_top: int = _setting(
        "KERNELPICK_CONFIRM_TOP",
        6,
        "Most configs re-timed together (interleaved) in a second round; 0: none.",
    )
    screen_cutoff: float = _setting(
        "KERNELPICK_SCREEN_CUTOFF",
        0.3,
        "First round: stop timing a config after 3 runs when they are this fraction slower than the best so far.",
    )
    confirm_within: float = _setting(
        "KERNELPICK_CONFIRM_WITHIN",
        0.1,
        "Second round: only configs whose fastest first-round run is within this fraction of the best median.",
    )
    confirm_rep_ms: float = _setting(
        "KERNELPICK_CONFIRM_REP_MS", 40.0, "Timed runs per config in the second round, in milliseconds."
    )
    min_reps: int = _setting("KERNELPICK_MIN_REPS", 5, "Fewest timed runs of a config, however slow it is.")
    max_reps: int = _setting("KERNELPICK_MAX_REPS", 1000, "Most timed runs of a config in one round.")
    isolate: Toggle = _setting(
        "KERNELPICK_ISOLATE",
        "auto",
        "Benchmark in worker processes that a crashing or hanging candidate cannot take down: auto (on with a GPU), on, off.",
    )
    worker_idle_s: float = _setting(
        "KERNELPICK_WORKER_IDLE",
        0.0,
        "Seconds a GPU worker stays up once no tuning runs (0: it ends when the last tuning does, "
        "since another process's CUDA context slows this one's kernels; the next tuning starts "
        "workers again while it compiles; 0.5 at least while tunings come one right after another). "
        "`kernelpick tune` keeps its workers up an hour unless this is set.",
    )
    compile_timeout_s: float = _setting(
        "KERNELPICK_COMPILE_TIMEOUT",
        300.0,
        "Seconds one config may take to compile before it is given up (isolated).",
    )
    bench_timeout_s: float = _setting(
        "KERNELPICK_BENCH_TIMEOUT",
        60.0,
        "Seconds one candidate may take in a worker, first run, checks and timing included, before it is killed.",
    )
    devices: str = _setting(
        "KERNELPICK_DEVICES",
        "",
        "GPUs that benchmark in parallel when isolated, e.g. '0,1' (default: every visible GPU of the model tuned for).",
    )
    timer: TimerName = _setting(
        "KERNELPICK_TIMER",
        "auto",
        "How GPU time is measured: cudagraph (replays, flush time taken off), profiler (kernel durations), events; auto: cudagraph.",
    )
    ops_static_shapes: bool = _setting(
        "KERNELPICK_OPS_STATIC_SHAPES",
        False,
        "kernelpick.ops's Triton GEMM templates bake each shape's sizes into their source (a compile per shape); off: sizes are arguments, one binary per config serves many shapes.",
    )
    compiled_picks: CompiledPicks = _setting(
        "KERNELPICK_COMPILED_PICKS",
        "all",
        "Under torch.compile, static sizes: the graph runs the pick itself, tuned while compiling: all (a PyTorch function such as torch.mm, or a Triton template as wrap_triton launches), library (PyTorch functions only), off (the operator selects when the graph runs). A kernelpick.op on GPU tensors: all traces its function, its launches through wrap_triton; library and off keep its node.",
    )
    ops_fusion: bool = _setting(
        "KERNELPICK_OPS_FUSION",
        True,
        "Under torch.compile, act(ops.mm(x, g)) * ops.mm(x, u) becomes one ops.gated_mm (an Inductor pre-grad pass, after any set there, added when a graph traces ops.mm); off: each product stays as written.",
    )
    background: bool = _setting(
        "KERNELPICK_BACKGROUND",
        False,
        "Selectors and kernelpick.ops: a new signature's first calls run the reference while the choices are tuned in a background thread; later calls switch to the pick (docs/selection.md).",
    )
    measure: Measure = _setting(
        "KERNELPICK_MEASURE",
        "auto",
        "How a selection ranks its choices: graph (device time, as a CUDA graph replays them), eager (the larger of device and host time per call, as launched one by one with the host in the loop); auto: eager for an eager call, graph in a CUDA-graph capture or a compiled graph.",
    )
    select_warmup_ms: float = _setting(
        "KERNELPICK_SELECT_WARMUP_MS",
        100.0,
        "Selection on a GPU: run the choices in turn this long before timing any (clocks up), unless the GPU timed others in the last 5 s.",
    )
    redis_url: str = _setting(
        "KERNELPICK_REDIS_URL",
        "",
        "A Redis server shared by machines, e.g. redis://host:6379/0, layered over the local store (extra kernelpick[redis]).",
    )
    redis_timeout_s: float = _setting(
        "KERNELPICK_REDIS_TIMEOUT",
        1.0,
        "Seconds a Redis request may take before the store carries on with local results only.",
    )
    store_key_file: Path | None = _setting(
        "KERNELPICK_STORE_KEY_FILE",
        None,
        "A file holding a secret the writers of a Redis store share: rows are signed with it (HMAC-SHA256), and only rows signed with it are read.",
    )
    one_tuning: bool = _setting(
        "KERNELPICK_ONE_TUNING",
        True,
        "Processes needing one key at once tune it once: one tunes (a lock per key beside the store, or in Redis), the others wait and run its pick.",
    )
    ranks: bool = _setting(
        "KERNELPICK_RANKS",
        True,
        "Under torch.distributed, the ranks deal each key's candidates out between them and all run one agreed pick (docs/multi-rank.md).",
    )
    wait_timeout_s: float = _setting(
        "KERNELPICK_WAIT_TIMEOUT",
        600.0,
        "Seconds a process waits for another process's (or rank's) tuning of a key before it tunes the key itself.",
    )
    tables: str = _setting(
        "KERNELPICK_TABLES",
        "",
        "Deployment tables (JSON from `kernelpick cache export`), path[:path]: their picks run with no tuning.",
    )
    no_tuning: bool = _setting(
        "KERNELPICK_NO_TUNING",
        False,
        "Never tune at run time: a call with no tabled or stored pick raises TuningRequired.",
    )
    search: str = _setting(
        "KERNELPICK_SEARCH",
        "exhaustive",
        "How configs are searched when a tuned kernel names no search=: exhaustive, random, halving, "
        "pattern, model, options as search= takes them: model(budget=0.1).",
    )
    search_budget: float = _setting(
        "KERNELPICK_SEARCH_BUDGET",
        0.0,
        "Most configs a search times per key (0: no limit; under 1: that fraction of the space).",
    )
    search_seconds: float = _setting(
        "KERNELPICK_SEARCH_SECONDS", 0.0, "Most seconds a search spends per key (0: no limit)."
    )
    search_seed: int = _setting("KERNELPICK_SEARCH_SEED", 0, "Seed of the searches that draw at random.")
    search_patience: float = _setting(
        "KERNELPICK_SEARCH_PATIENCE",
        5.0,
        "In a search, give up a config compiling this many times longer than its batch's median (0: wait).",
    )
    log_path: Path | None = _setting(
        "KERNELPICK_LOG", None, "Append one JSON line per tuning to this file (for reports and audits)."
    )
    record_path: Path | None = _setting(
        "KERNELPICK_RECORD",
        None,
        "Append every key this process meets (tuned, stored or tabled) to this JSON-lines file, which `kernelpick tune` tunes ahead.",
    )
    op_fast_path: bool = _setting(
        "KERNELPICK_OP_FAST_PATH",
        True,
        "Eager calls of a kernelpick.op skip PyTorch's dispatcher when nothing traces (read at registration).",
    )


_ENV_NAMES = {f.name: f.metadata["env"] for f in fields(Settings)}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse(name: str, annotation: Any, raw: object) -> Any:
    """Convert `raw` (a string from the environment, or a Python value) to the field's type."""
    env = _ENV_NAMES[name]
    if name == "search" and annotation is str:  # a strategy's name, checked here; its options when made
        head, paren, rest = str(raw).strip().partition("(")
        return _parse(name, SearchName, head) + paren + rest
    origin = typing.get_origin(annotation)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if raw is None or raw == "":
            return None
        return _parse(name, inner[0], raw)
    if origin is Literal:
        choices = typing.get_args(annotation)
        text = str(raw).strip().lower() if isinstance(raw, (str, bool)) else raw
        if "on" in choices and "off" in choices and text not in choices:  # a toggle: booleans too
            if raw is True or text in _TRUE:
                return "on"
            if raw is False or text in _FALSE - {""}:
                return "off"
        if text not in choices:
            hint = ", or a boolean (1/0, true/false, yes/no)" if "on" in choices else ""
            raise SettingsError(f"{env}={raw!r} is not one of {', '.join(map(repr, choices))}{hint}")
        return text
    if annotation is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise SettingsError(f"{env}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off")
    if annotation is int or annotation is float:
        try:
            value = annotation(raw if isinstance(raw, (int, float)) else str(raw))
        except (TypeError, ValueError):
            kind = "an integer" if annotation is int else "a number"
            raise SettingsError(f"{env}={raw!r} is not {kind}") from None
        if not math.isfinite(value):
            raise SettingsError(f"{env}={raw!r} is not a finite number")
        if value < 0:
            raise SettingsError(f"{env}={raw!r} must not be negative")
        return value
    if annotation is Path:
        return Path(str(raw)).expanduser()
    return raw


_HINTS = typing.get_type_hints(Settings)


def from_environ(environ: Mapping[str, str] | None = None) -> Settings:
    """Build settings from `environ` (default: the process environment). A `KERNELPICK_*` variable
    that is no setting (misspelt, or from another version) is ignored, with a warning naming the
    closest setting, once per process.

    Raises:
        SettingsError: a variable has a value of the wrong kind; the message names it.
    """
    environ = os.environ if environ is None else environ
    _warn_of_unknown_variables(environ)
    values = {
        f.name: _parse(f.name, _HINTS[f.name], environ[f.metadata["env"]])
        for f in fields(Settings)
        if f.metadata["env"] in environ
    }
    return Settings(**values)


_KNOWN = set(_ENV_NAMES.values())
_unknown_warned: set[str] = set()


def _warn_of_unknown_variables(environ: Mapping[str, str]) -> None:
    for name in environ:
        if not name.startswith("KERNELPICK_") or name in _KNOWN or name in _unknown_warned:
            continue
        _unknown_warned.add(name)
        # Compared without the prefix they all share, which would make every name look close.
        suffixes = sorted(known.removeprefix("KERNELPICK_") for known in _KNOWN)
        closest = difflib.get_close_matches(name.removeprefix("KERNELPICK_"), suffixes, n=1)
        hint = (
            f"did you mean KERNELPICK_{closest[0]}?"
            if closest
            else "`kernelpick settings` lists the settings"
        )
        log.warning("%s is set but is not a kernelpick setting, so it is ignored: %s", name, hint)


_from_env: Settings | None = None
_override: contextvars.ContextVar[Settings | None] = contextvars.ContextVar(
    "kernelpick_settings", default=None
)


def current() -> Settings:
    """The settings in effect here: the innermost `override`, else the environment (read once)."""
    scoped = _override.get()
    if scoped is not None:
        return scoped
    global _from_env
    if _from_env is None:
        _from_env = from_environ()
    return _from_env


def reload() -> Settings:
    """Read the environment again (after it changed) and return the new settings."""
    global _from_env
    _from_env = None
    return current()


@contextlib.contextmanager
def override(**changes: Any) -> Iterator[Settings]:
    """Scope changed settings to a `with` block, in this thread or asyncio task.

    Values are given by field name (`override(cache_dir=tmp, print_tables=True)`) and are checked
    and converted like environment values.
    """
    unknown = set(changes) - set(_ENV_NAMES)
    if unknown:
        raise SettingsError(f"unknown settings {sorted(unknown)}; known: {sorted(_ENV_NAMES)}")
    parsed = {name: _parse(name, _HINTS[name], value) for name, value in changes.items()}
    token = _override.set(replace(current(), **parsed))
    try:
        yield _override.get()  # type: ignore[misc]
    finally:
        _override.reset(token)


def read_each(environ: Mapping[str, str] | None = None) -> list[tuple[str, Any, SettingsError | None]]:
    """Each setting's field name, value and error, in declaration order: the settings in effect, as
    `current()` gives them, except that a variable with a bad value is not raised but reported, with
    its text as the value, so that every bad one can be shown at once (`kernelpick settings`).

    Args:
        environ: read these variables (default: the innermost `override`, else the process environment).
    """
    scoped = _override.get() if environ is None else None
    if scoped is not None:
        return [(f.name, getattr(scoped, f.name), None) for f in fields(Settings)]
    environ = os.environ if environ is None else environ
    _warn_of_unknown_variables(environ)
    found: list[tuple[str, Any, SettingsError | None]] = []
    for f in fields(Settings):
        raw = environ.get(f.metadata["env"])
        if raw is None:
            found.append((f.name, f.default, None))
            continue
        try:
            found.append((f.name, _parse(f.name, _HINTS[f.name], raw), None))
        except SettingsError as error:
            found.append((f.name, raw, error))
    return found


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, in declaration order."""
    return [(f.metadata["env"], repr(f.default), f.metadata["doc"]) for f in fields(Settings)]


_writable: set[Path] = set()  # cache dirs written to once in this process: not probed again
_warned: set[Path] = set()
_temporary: Path | None = None
_files_lock = threading.Lock()


def _default_cache_dir() -> Path:
    """The platform's cache folder for kernelpick (platformdirs'); where platformdirs is not installed
    (a GPU machine's image, say), the XDG one: `$XDG_CACHE_HOME/kernelpick`, else `~/.cache/kernelpick`."""
    try:
        import platformdirs
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelpick"
    return Path(platformdirs.user_cache_dir("kernelpick", appauthor=False))


def cache_dir() -> Path:
    """The folder of kernelpick's persistent data, created if missing.

    Raises:
        CacheDirError: the folder cannot be created or written (it is a file, or under one, or
            permissions or a read-only file system forbid it); the message names the folder,
            `KERNELPICK_CACHE_DIR` and why.
    """
    path = current().cache_dir
    given = path is not None
    if path is None:
        path = _default_cache_dir()
    try:
        # Private where kernelpick makes it (a folder that exists keeps the mode its owner gave it):
        # what is in it is imported (rendered kernels) and trusted (results).
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path not in _writable:  # an existing folder may still be read-only: write a file once
            with tempfile.TemporaryFile(dir=path, prefix=".kernelpick-probe-"):
                pass
            _writable.add(path)
    except OSError as error:
        where = (
            f"KERNELPICK_CACHE_DIR={path}"
            if given
            else f"the user cache dir {path} (KERNELPICK_CACHE_DIR unset)"
        )
        raise CacheDirError(
            f"{where} cannot be used as kernelpick's cache dir: {_why_unusable(path, error)}; "
            "point KERNELPICK_CACHE_DIR at a folder you can write",
            str(path),
        ) from error
    return path


def _why_unusable(path: Path, error: OSError) -> str:
    """Why creating or writing `path` failed, in words: which part is a file, or the system's reason."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            return "it is a file, not a folder" if part == path else f"{part} is a file, not a folder"
    return error.strerror or str(error)


def usable_cache_dir() -> Path | None:
    """The cache dir, or None when it cannot be used (`cache_dir()` raises): then a warning naming it
    and why, once per process and folder, says that results are kept in memory for this process only."""
    try:
        return cache_dir()
    except CacheDirError as error:
        path = Path(error.path)
        with _files_lock:
            first = path not in _warned
            _warned.add(path)
        if first:
            log.warning(
                "%s. Until then kernelpick keeps tuning results in memory for this process only and "
                "writes rendered kernels to a temporary folder",
                error,
            )
        return None


def cache_dir_or_temporary() -> Path:
    """Where to write files this process reads back (rendered kernels, which Triton and worker
    processes import by path): the cache dir, or when it cannot be used (warned once, as
    `usable_cache_dir`), a temporary folder of this process, removed when it exits."""
    folder = usable_cache_dir()
    if folder is not None:
        return folder
    global _temporary
    with _files_lock:
        if _temporary is None:
            _temporary = Path(tempfile.mkdtemp(prefix="kernelpick-cache-"))
            atexit.register(shutil.rmtree, _temporary, ignore_errors=True)
        return _temporary


def terminal_columns() -> int | None:
    """`COLUMNS`, the width shells give their terminal, where it is set to a number: how wide output
    to a pipe or a file may be (`kernelpick.console`). Not a setting of kernelpick's own."""
    # Read here because nothing else in kernelpick reads the environment (STYLE.md).
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def local_ranks() -> int:
    """`LOCAL_WORLD_SIZE`, the number of ranks `torchrun` started on this machine, where it is set to a
    number (else 1): each rank then measures on its own GPU. Not a setting of kernelpick's own."""
    count = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(count) if count.isdigit() and int(count) > 0 else 1


def visible_device(index: int) -> str:
    """What a child process's `CUDA_VISIBLE_DEVICES` must say for it to see this process's GPU `index`
    (as its only GPU): that GPU's entry in this process's own `CUDA_VISIBLE_DEVICES` (a number, a
    UUID or a MIG name), where that variable narrows what this process sees; else the index itself.
    Not a setting of kernelpick's own.

    A process of `kernelpick tune --devices 1` or a Ray actor sees its GPU as `cuda:0`; told "0", its
    worker would measure on the machine's first GPU, beside another process's work.
    """
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None or not text.strip():
        return str(index)
    entries = [entry.strip() for entry in text.split(",")]
    if not 0 <= index < len(entries) or not entries[index]:
        return str(index)
    return entries[index]


def child_environment(changes: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with `changes` (None removes a variable), for a process it starts:
    its PYTHONPATH is this process's `sys.path` as it is now, so that it imports what this one can."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)))
    for name, value in changes.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return environment


def as_environment(values: Settings | None = None) -> dict[str, str]:
    """The `KERNELPICK_*` variables that give another process these settings (default: the current
    ones, overrides included): every field that differs from its default."""
    values = current() if values is None else values
    environment = {}
    for f in fields(Settings):
        value = getattr(values, f.name)
        if value == f.default:
            continue
        environment[f.metadata["env"]] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return environment


def replace_environment(environment: Mapping[str, str]) -> Settings:
    """Make `environment` this process's whole environment and read the settings again: for a
    process forked to work for another (a worker forked by the zygote, given what a started worker
    would get, CUDA_VISIBLE_DEVICES among it, before it uses CUDA)."""
    os.environ.clear()
    os.environ.update(environment)
    return reload()


def adopt_environment(changes: Mapping[str, str]) -> Settings:
    """Set `changes` in this process's environment and read the settings again: for a process
    started to work for another (given `as_environment()`, and e.g. CUDA_VISIBLE_DEVICES)."""
    os.environ.update(changes)
    return reload()


def compile_workers() -> int:
    """How many configs to compile at once."""
    return current().compile_workers or os.cpu_count() or 1

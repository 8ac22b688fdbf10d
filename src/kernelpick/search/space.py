"""`Space`: a tuning space declared by its dimensions, cut by a constraint and the device's limits."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from kernelpick.config import OPTION_DEFAULTS, Config
from kernelpick.device import REGISTERS_PER_BLOCK, DeviceInfo
from kernelpick.errors import ConfigError

#: What a constraint and a shared-memory estimate are called with: each dimension's value by name.
Values = dict[str, Any]
Constraint = Callable[[Values], bool]
SharedMemory = Callable[[Values], int]
Kind = Literal["power_of_two", "integer", "number", "choice"]

#: The dimensions that make a space look like a tiled GEMM, for the default shared-memory estimate.
GEMM_DIMENSIONS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages")
#: Bytes per operand element the default estimate assumes (float16 and bfloat16).
GEMM_ELEMENT_BYTES = 2

_VALUE_TYPES = (bool, int, float, str, type(None))


def gemm_shared_memory(values: Values, element_bytes: int = GEMM_ELEMENT_BYTES) -> int:
    """The default shared-memory estimate of a tiled GEMM, in bytes:
    `(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * num_stages * element_bytes` (2: 16-bit operands).

    It counts the pipeline's buffers of A and B tiles only: not the epilogue nor what the compiler
    adds. A config at the edge may still run out of resources (the benchmarker then records
    `out_of_resources`); for 32-bit operands or other kernels give `shared_memory=`.
    """
    tiles = values["BLOCK_M"] * values["BLOCK_K"] + values["BLOCK_K"] * values["BLOCK_N"]
    return int(tiles * values["num_stages"] * element_bytes)


def _key(value: Any) -> tuple[str, Any]:
    """A dictionary key telling 1, 1.0 and True apart (they hash alike)."""
    try:
        hash(value)
    except TypeError:
        return ("unhashable", repr(value))
    return (type(value).__qualname__, value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Dimension:
    """One axis of a space: its name and values, in the order a search steps through them.

    Numbers are sorted ascending, so the neighbour of 64 in a power-of-two dimension is 32 or 128
    and the neighbour of 4 warps is 2 or 8; other values (strings, booleans, None, mixed kinds) keep
    the order given.
    """

    name: str
    values: tuple[Any, ...]
    _positions: Mapping[tuple[str, Any], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unique = tuple({_key(v): v for v in self.values}.values())
        if unique and all(_is_number(v) for v in unique):
            unique = tuple(sorted(unique))
        object.__setattr__(self, "values", unique)
        positions = {_key(v): i for i, v in enumerate(unique)}
        object.__setattr__(self, "_positions", MappingProxyType(positions))

    @classmethod
    def declared(cls, name: str, values: object) -> Dimension:
        """A dimension as a user declares it, checked.

        Raises:
            ConfigError: `values` is not a list of values, is empty, holds a kind of value a config
                cannot carry, or a compile option (num_warps, ...) that is not a positive integer.
        """
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise ConfigError(
                f"Space dimension {name}={values!r} is not a list of values: give the values to try, "
                f"e.g. {name}=[{values!r}]"
            )
        listed = list(values)
        if not listed:
            raise ConfigError(f"Space dimension {name} has no values: give at least one, e.g. {name}=[64]")
        for value in listed:
            if not isinstance(value, _VALUE_TYPES):
                raise ConfigError(
                    f"Space dimension {name} has a value of an unknown kind, {type(value).__name__} "
                    f"{value!r}: values must be integers, floats, strings, booleans or None"
                )
            if name in OPTION_DEFAULTS and not (
                (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
                or (name == "maxnreg" and value is None)
            ):
                raise ConfigError(
                    f"Space dimension {name} has {value!r}: {name} values must be positive integers"
                    + (" (or None, no cap)" if name == "maxnreg" else "")
                )
        return cls(name, tuple(listed))

    @property
    def kind(self) -> Kind:
        """power_of_two, integer, number (a float among them) or choice (anything else)."""
        if not all(_is_number(v) for v in self.values):
            return "choice"
        if all(isinstance(v, int) for v in self.values):
            if all(v > 0 and v & (v - 1) == 0 for v in self.values):
                return "power_of_two"
            return "integer"
        return "number"

    @property
    def ordered(self) -> bool:
        """Whether the values lie on a scale (numbers), not a set of choices."""
        return self.kind != "choice"

    def position(self, value: Any) -> int:
        """Where `value` stands among the values.

        Raises:
            ConfigError: `value` is not one of them.
        """
        found = self._positions.get(_key(value))
        if found is None:
            raise ConfigError(
                f"{self.name}={value!r} is not one of the dimension's values {list(self.values)}"
            )
        return found

    def __len__(self) -> int:
        return len(self.values)


def config_values(config: Config) -> Values:
    """A config's value along every dimension it can have: meta-parameters and compile options."""
    return {**config.kwargs, **config.options()}


def dimensions_of(configs: Sequence[Config]) -> dict[str, Dimension]:
    """The dimensions a list of configs spans: every meta-parameter and option, with the values seen
    (None where a config lacks a meta-parameter others have)."""
    names = dict.fromkeys(name for config in configs for name in config.kwargs)
    names.update(dict.fromkeys(OPTION_DEFAULTS))
    seen: dict[str, list[Any]] = {name: [] for name in names}
    for config in configs:
        values = config_values(config)
        for name, found in seen.items():
            found.append(values.get(name))
    return {name: Dimension(name, tuple(found)) for name, found in seen.items()}


class Space:
    """A tuning space declared by its dimensions instead of listed config by config.

    `Space(BLOCK_M=[64, 128, 256], BLOCK_N=[64, 128, 256], num_warps=[4, 8], constraint=lambda c:
    c["BLOCK_M"] * c["BLOCK_N"] <= 128 * 256)`. Dimensions named num_warps, num_stages, num_ctas or
    maxnreg become the configs' compile options, the others their meta-parameters.

    Args:
        constraint: called with each combination's values by name; False leaves it out.
        shared_memory: the bytes of shared memory a combination needs, to leave out those over the
            device's limit. Default: `gemm_shared_memory` when the space has BLOCK_M, BLOCK_N,
            BLOCK_K and num_stages, else no estimate.
        **dimensions: each dimension's values to try.

    Raises:
        ConfigError: no dimensions, or a dimension that is empty or holds values a config cannot carry.
    """

    __slots__ = ("_configs", "_dimensions", "constraint", "shared_memory")

    def __init__(
        self,
        constraint: Constraint | None = None,
        shared_memory: SharedMemory | None = None,
        **dimensions: Iterable[Any],
    ) -> None:
        if not dimensions:
            raise ConfigError(
                "a Space needs at least one dimension, e.g. Space(BLOCK_M=[64, 128], num_warps=[4, 8])"
            )
        self._dimensions = MappingProxyType(
            {name: Dimension.declared(name, values) for name, values in dimensions.items()}
        )
        self.constraint = constraint
        if shared_memory is None and all(name in dimensions for name in GEMM_DIMENSIONS):
            shared_memory = gemm_shared_memory
        self.shared_memory = shared_memory
        self._configs: dict[DeviceInfo | None, tuple[Config, ...]] = {}

    @property
    def dimensions(self) -> Mapping[str, Dimension]:
        """The dimensions by name, in the order declared."""
        return self._dimensions

    @property
    def size(self) -> int:
        """How many combinations the dimensions make, before the constraint and the device's limits."""
        total = 1
        for dimension in self._dimensions.values():
            total *= len(dimension)
        return total

    def configs(self, device: DeviceInfo | None = None) -> list[Config]:
        """Every combination of the dimensions' values that meets the constraint and, on a GPU, fits
        in its shared memory and registers: in a stable order (the last dimension varies fastest).

        Registers are checked where maxnreg is a dimension: num_warps * 32 * maxnreg must not exceed
        65,536. Shared memory is checked against `DeviceInfo.shared_memory_limit` (a device described
        without its own figure: its compute capability's). Without a device, or on a CPU, no device
        limit applies.

        Raises:
            ConfigError: no combination is left; the message says what left each out.
        """
        if device not in self._configs:
            self._configs[device] = self._enumerate(device)
        return list(self._configs[device])

    def _enumerate(self, device: DeviceInfo | None) -> tuple[Config, ...]:
        gpu = device is not None and not device.interpreter
        shared_limit = (device.shared_memory_limit or 0) if device is not None and gpu else 0
        names = list(self._dimensions)
        left_out: Counter[str] = Counter()
        least_shared: int | None = None
        kept = []
        for combination in itertools.product(*(d.values for d in self._dimensions.values())):
            values = dict(zip(names, combination))
            if self.constraint is not None and not self._call(self.constraint, "constraint", values):
                left_out["constraint"] += 1
                continue
            if shared_limit and self.shared_memory is not None:
                need = int(self._call(self.shared_memory, "shared_memory", values))
                if need > shared_limit:
                    left_out["shared_memory"] += 1
                    least_shared = need if least_shared is None else min(least_shared, need)
                    continue
            if gpu and values.get("maxnreg") is not None:
                warps = values.get("num_warps", OPTION_DEFAULTS["num_warps"])
                if warps * 32 * values["maxnreg"] > REGISTERS_PER_BLOCK:
                    left_out["registers"] += 1
                    continue
            kept.append(self._config(values))
        if not kept:
            raise ConfigError(self._nothing_left(left_out, device, least_shared))
        return tuple(kept)

    @staticmethod
    def _config(values: Values) -> Config:
        options = {name: value for name, value in values.items() if name in OPTION_DEFAULTS}
        kwargs = {name: value for name, value in values.items() if name not in OPTION_DEFAULTS}
        return Config(kwargs, **options)

    def _call(self, function: Callable[[Values], Any], role: str, values: Values) -> Any:
        try:
            return function(dict(values))
        except Exception as error:
            raise ConfigError(
                f"the Space's {role} raised {error!r} for {values}: it is called with a dict of the "
                f"space's dimensions ({', '.join(self._dimensions)}) and must handle every combination"
            ) from error

    def _nothing_left(
        self, left_out: Counter[str], device: DeviceInfo | None, least_shared: int | None
    ) -> str:
        estimate = "the default GEMM estimate" if self.shared_memory is gemm_shared_memory else "its estimate"
        limit = (device.shared_memory_limit or 0) if device is not None else 0
        phrases = {
            "constraint": (
                "fail the constraint",
                "loosen the constraint or add values to the dimensions",
            ),
            "shared_memory": (
                f"need more shared memory than the {device.name if device else 'device'}'s {_kib(limit)}"
                f" (by {estimate}; the least needs {_kib(least_shared or 0)})",
                "add smaller BLOCK sizes or fewer num_stages, or give shared_memory= a closer estimate",
            ),
            "registers": (
                f"need more registers than a program may have (num_warps * 32 * maxnreg > {REGISTERS_PER_BLOCK:,})",
                "add smaller maxnreg or num_warps values",
            ),
        }
        reasons = [(phrase, left_out[reason]) for reason, phrase in phrases.items() if left_out[reason]]
        if len(reasons) == 1:
            (phrase, advice), count = reasons[0]
            return f"all {count:,} configs of {self!r} {phrase}: {advice}"
        parts = "; ".join(f"{count:,} {phrase}" for (phrase, _), count in reasons)
        advice = "; ".join(advice for (_, advice), _ in reasons)
        return f"none of the {self.size:,} configs of {self!r} is left: {parts}. To keep some: {advice}"

    def __len__(self) -> int:
        """How many configs meet the constraint (no device limits)."""
        return len(self.configs())

    def __repr__(self) -> str:
        parts = [f"{name}={list(d.values)!r}" for name, d in self._dimensions.items()]
        if self.constraint is not None:
            parts.append(f"constraint={_name(self.constraint)}")
        if self.shared_memory is gemm_shared_memory:
            parts.append("shared_memory=<default GEMM estimate>")
        elif self.shared_memory is not None:
            parts.append(f"shared_memory={_name(self.shared_memory)}")
        return f"Space({', '.join(parts)})"


def _name(function: Callable[..., Any]) -> str:
    return f"<{getattr(function, '__qualname__', type(function).__name__)}>"


def _kib(size: int) -> str:
    return f"{size / 1024:,.0f} KiB" if size % 1024 == 0 or size > 100 * 1024 else f"{size / 1024:,.1f} KiB"

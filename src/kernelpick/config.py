"""`Config`: one point of a tuning space (meta-parameters plus compile options), comparable and storable."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kernelpick.errors import ConfigError

#: Compile options a config may carry besides its meta-parameters, with Triton's defaults.
OPTION_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
)


@dataclass(frozen=True, slots=True, eq=False)
class Config:
    """Meta-parameters and compile options for one launch of a kernel.

    Accepted wherever a `triton.Config` is; `Config.of(triton_config)` converts one. Two configs are
    equal when their meta-parameters and options are; `pre_hook` does not take part.

    Args:
        kwargs: the kernel's constexpr meta-parameters, e.g. `{"BLOCK_M": 128}`.
        num_warps: warps per program.
        num_stages: software-pipelining depth.
        num_ctas: programs per cluster (Hopper and newer).
        maxnreg: register cap per thread, or None.
        pre_hook: called with the launch's named arguments before each launch with this config.
        ir_override: a file of IR (`.ttir`, `.ttgir`, `.llir`, `.ptx`) that Triton compiles instead
            of the kernel's own, at its stage (Triton's `ir_override`).
    """

    kwargs: Mapping[str, Any]
    num_warps: int = OPTION_DEFAULTS["num_warps"]
    num_stages: int = OPTION_DEFAULTS["num_stages"]
    num_ctas: int = OPTION_DEFAULTS["num_ctas"]
    maxnreg: int | None = OPTION_DEFAULTS["maxnreg"]
    pre_hook: Callable[[dict[str, Any]], object] | None = None
    ir_override: str | None = None
    _launch_kwargs: Mapping[str, Any] = field(init=False, repr=False)
    _identity: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kwargs, Mapping):
            raise ConfigError(
                f"Config kwargs must be a mapping of meta-parameters, got {type(self.kwargs).__name__}"
            )
        for name, value in self.options().items():
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"Config {name} must be a positive integer, got {value!r}")
        kwargs = MappingProxyType(dict(self.kwargs))
        object.__setattr__(self, "kwargs", kwargs)
        # In `triton.Config.all_kwargs`'s order, so that a `triton.Config` compares equal to its twin.
        options = {
            "num_warps": self.num_warps,
            "num_ctas": self.num_ctas,
            "num_stages": self.num_stages,
            "maxnreg": self.maxnreg,
            "ir_override": self.ir_override,
        }
        launch = {**kwargs, **{k: v for k, v in options.items() if v is not None}}
        object.__setattr__(self, "_launch_kwargs", MappingProxyType(launch))
        object.__setattr__(self, "_identity", _canonical(self.to_dict()))

    @classmethod
    def of(cls, config: Any) -> Config:
        """Convert a `triton.Config` (or a `Config`) to a `Config`.

        Raises:
            ConfigError: `config` is neither.
        """
        if isinstance(config, Config):
            return config
        if hasattr(config, "kwargs") and hasattr(config, "num_warps"):
            return cls(
                dict(config.kwargs),
                num_warps=config.num_warps,
                num_stages=config.num_stages,
                num_ctas=getattr(config, "num_ctas", 1),
                maxnreg=getattr(config, "maxnreg", None),
                pre_hook=getattr(config, "pre_hook", None),
                ir_override=getattr(config, "ir_override", None),
            )
        raise ConfigError(
            f"expected a kernelpick.Config or triton.Config, got {type(config).__name__}: {config!r}"
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """Rebuild a config from `to_dict()` output (plain data, e.g. from a store)."""
        options = {k: data.get(k, d) for k, d in OPTION_DEFAULTS.items()}
        return cls(dict(data["kwargs"]), **options, ir_override=data.get("ir_override"))

    def options(self) -> dict[str, Any]:
        """The compile options: num_warps, num_stages, num_ctas, maxnreg."""
        return {k: getattr(self, k) for k in OPTION_DEFAULTS}

    def all_kwargs(self) -> Mapping[str, Any]:
        """Meta-parameters, options and the IR override together, as passed to a launch (like
        `triton.Config.all_kwargs`)."""
        return self._launch_kwargs

    def to_dict(self) -> dict[str, Any]:
        """Plain data: `{"kwargs": {...}, "num_warps": 4, ...}` (and `ir_override` when set)."""
        data = {"kwargs": dict(self.kwargs), **self.options()}
        if self.ir_override is not None:
            data["ir_override"] = self.ir_override
        return data

    def to_data(self) -> dict[str, Any]:
        """`to_dict()` as JSON-safe data, for reports: meta-parameter values that JSON has no type
        for (Triton dtypes, say) become "type:value" strings."""
        data: dict[str, Any] = json.loads(self._identity)
        return data

    @property
    def identity(self) -> str:
        """Canonical JSON of meta-parameters and options; equal configs have equal identities."""
        return self._identity

    @property
    def digest(self) -> str:
        """A short stable hash of `identity`, for store rows."""
        return hashlib.sha256(self._identity.encode()).hexdigest()[:20]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented  # a triton.Config compares itself: equal when its twin is
        return other._identity == self._identity

    def __hash__(self) -> int:
        return hash(self._identity)

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps={self.num_warps}", f"num_stages={self.num_stages}"]
        if self.num_ctas != 1:
            parts.append(f"num_ctas={self.num_ctas}")
        if self.maxnreg is not None:
            parts.append(f"maxnreg={self.maxnreg}")
        if self.ir_override is not None:
            parts.append(f"ir_override={self.ir_override}")
        return ", ".join(parts)


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    """JSON form of meta-parameter values that are not JSON types (dtypes, tuples of them, ...)."""
    return f"{type(value).__name__}:{value}"


def default_config(name: str, configs: Sequence[Config], default: Any) -> Config | None:
    """The config `default` names (one of `configs`, or its index).

    Raises:
        ConfigError: it names none of them.
    """
    if default is None:
        return None
    if isinstance(default, int) and not isinstance(default, bool):
        if not -len(configs) <= default < len(configs):
            raise ConfigError(
                f"default={default} of kernel `{name}` is not an index of its {len(configs)} configs"
            )
        return configs[default]
    try:
        wanted = Config.of(default)
    except (ConfigError, TypeError):
        wanted = None
    if wanted not in configs:
        raise ConfigError(
            f"default of kernel `{name}` must be one of its configs or an index into them, got {default!r}"
        )
    return wanted

"""Pruning a config space before benchmarking, with Triton's `prune_configs_by` semantics."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernelpick.config import Config
from kernelpick.errors import ConfigError, NoValidConfigs

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
        """The configs left to tune, as Triton prunes them.

        Args:
            configs: the configs to prune.
            positional: the call's positional arguments by name (Triton's `named_args`: arguments
                given by keyword are in `kwargs`, not here).
            kwargs: the call's keyword arguments.
            given: each config as the user gave it (a `triton.Config`, say), which is what
                `early_config_prune` receives and may return; configs it makes up are added.

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

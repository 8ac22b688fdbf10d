"""tune/autotuner.py, Pruner: `prune_configs_by` behaves as in `triton.autotune`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import triton

from kernelpick.config import Config
from kernelpick.errors import ConfigError, NoValidConfigs
from kernelpick.tune.autotuner import Pruner

CONFIGS = [Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128) for w in (4, 8)]
NAMED = {"x_ptr": "x", "n": 1000}


def by_block(**named: Any) -> float:
    """A perf model in which bigger blocks are faster and more warps break ties."""
    return 1.0 / named["BLOCK"] - named["num_warps"] * 1e-6


def test_no_pruning_keeps_every_config() -> None:
    # Nothing to prune with: no pruner at all, and an autotuned kernel tunes every config.
    assert Pruner.of(None) is None and Pruner.of({}) is None and Pruner.of({"top_k": 2}) is None


def test_early_config_prune_gets_the_configs_named_arguments_and_keyword_arguments() -> None:
    seen: dict[str, Any] = {}

    def early(configs: Sequence[Config], named: dict[str, Any], **kwargs: Any) -> list[Config]:
        seen.update(configs=list(configs), named=named, kwargs=kwargs)
        return [c for c in configs if c.kwargs["BLOCK"] <= named["n"] // 16]

    kept = Pruner.of({"early_config_prune": early})(CONFIGS, NAMED, {"alpha": 2.0})
    assert kept == [c for c in CONFIGS if c.kwargs["BLOCK"] <= 62]
    assert seen == {"configs": CONFIGS, "named": NAMED, "kwargs": {"alpha": 2.0}}


def test_early_config_prune_may_return_triton_configs() -> None:
    def early(configs: Sequence[Config], named: dict[str, Any], **kwargs: Any) -> list[Any]:
        return [triton.Config({"BLOCK": 256}, num_warps=2)]

    assert Pruner.of({"early_config_prune": early})(CONFIGS, NAMED, {}) == [
        Config({"BLOCK": 256}, num_warps=2)
    ]


def test_pruning_everything_is_an_error_that_says_so() -> None:
    pruner = Pruner.of({"early_config_prune": lambda configs, named, **kwargs: []})
    with pytest.raises(NoValidConfigs, match="No valid autotuner configs after pruning"):
        pruner(CONFIGS, NAMED, {})


def test_perf_model_keeps_the_top_k_best_estimates_best_first() -> None:
    kept = Pruner.of({"perf_model": by_block, "top_k": 3})(CONFIGS, NAMED, {})
    assert kept == [
        Config({"BLOCK": 128}, num_warps=8),
        Config({"BLOCK": 128}, num_warps=4),
        Config({"BLOCK": 64}, num_warps=8),
    ]


def test_perf_model_gets_named_arguments_keyword_arguments_and_the_configs_launch_kwargs() -> None:
    calls: list[dict[str, Any]] = []

    def model(**named: Any) -> float:
        calls.append(named)
        return named["BLOCK"]

    Pruner.of({"perf_model": model, "top_k": 1})(CONFIGS[:2], NAMED, {"alpha": 2.0})
    assert calls[0] == {**NAMED, "alpha": 2.0, **CONFIGS[0].all_kwargs()}


def test_perf_model_accepts_arguments_passed_by_keyword() -> None:
    # kernel[grid](x, n=1000): `n` is among the named arguments and the keyword arguments alike.
    kept = Pruner.of({"perf_model": by_block, "top_k": 1})(CONFIGS, NAMED, {"n": 1000})
    assert kept == [Config({"BLOCK": 128}, num_warps=8)]


@pytest.mark.parametrize(("top_k", "count"), [(1.0, 8), (0.5, 4), (0.25, 2), (0.01, 1), (2.0, 2)])
def test_fractional_top_k_keeps_that_share_and_at_least_one(top_k: float, count: int) -> None:
    kept = Pruner.of({"perf_model": by_block, "top_k": top_k})(CONFIGS, NAMED, {})
    assert len(kept) == count
    assert kept == (
        CONFIGS
        if count == len(CONFIGS)
        else sorted(CONFIGS, key=lambda c: by_block(**c.all_kwargs()))[:count]
    )


def test_perf_model_is_not_called_when_nothing_would_be_dropped() -> None:
    def model(**named: Any) -> float:
        raise AssertionError("not needed")

    assert Pruner.of({"perf_model": model, "top_k": 8})(CONFIGS, NAMED, {}) == CONFIGS


def test_perf_model_ranks_what_early_pruning_kept() -> None:
    pruner = Pruner.of(
        {
            "early_config_prune": lambda configs, named, **kwargs: [
                c for c in configs if c.kwargs["BLOCK"] < 64
            ],
            "perf_model": by_block,
            "top_k": 1,
        }
    )
    assert pruner(CONFIGS, NAMED, {}) == [Config({"BLOCK": 32}, num_warps=8)]


def test_unknown_entries_are_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown entries \['topk'\]"):
        Pruner.of({"perf_model": by_block, "topk": 2})


@pytest.mark.parametrize("top_k", [0, -1, 0.0, "2", True, None])
def test_bad_top_k_is_rejected(top_k: object) -> None:
    with pytest.raises(ConfigError, match="top_k must be a positive int or a fraction"):
        Pruner.of({"perf_model": by_block, "top_k": top_k})

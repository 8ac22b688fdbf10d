"""search/random.py: the candidates in a seeded random order, 16 at a time, each once."""

from __future__ import annotations

from kernelpick.config import Config
from kernelpick.search import make_strategy, run_search
from tests.search.synthetic import Bench

CONFIGS = [Config({"BLOCK": b}) for b in range(1, 41)]


def _order(seed: int) -> list[list[Config]]:
    bench = Bench(lambda config, effort: 1.0)
    run_search(make_strategy("random", CONFIGS, seed=seed), bench.measure)
    return [batch for batch, _ in bench.batches]


def test_every_candidate_is_timed_once_in_batches_of_16_in_a_seeded_order() -> None:
    batches = _order(seed=5)
    assert [len(b) for b in batches] == [16, 16, 8]
    timed = [c for b in batches for c in b]
    assert sorted(timed, key=CONFIGS.index) == CONFIGS and timed != CONFIGS
    assert _order(seed=5) == batches and _order(seed=6) != batches

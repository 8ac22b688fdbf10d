"""search/model.py: a random-forest surrogate picks what to time: it finds the best of a GEMM
space in a tenth of exhaustive's time where random search does not, learns where configs fail,
and says what to install when scikit-learn is missing."""

from __future__ import annotations

import statistics
import sys

import pytest

from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search import Budget, make_strategy, run_search
from kernelpick.search.replay import score
from tests.search.synthetic import BOWL_SPACE, OPTIMUM, Bench, bowl, recorded_gemm


@pytest.mark.parametrize(
    "shape", [(4096, 4096, 4096), (512, 4096, 4096), (16384, 1024, 512), (64, 8192, 2048)]
)
def test_on_a_synthetic_gemm_space_it_nears_the_best_in_a_tenth_of_exhaustives_time(
    shape: tuple[int, int, int],
) -> None:
    recorded = recorded_gemm(*shape)
    model = score("model", recorded, None, seeds=(0, 1, 2))
    tenth = 0.1 * model.exhaustive_seconds
    at_tenth = [run.ratio_at(tenth) for run in model.runs]
    randomly = score("random", recorded, Budget(max_seconds=tenth), seeds=(0, 1, 2))
    assert statistics.fmean(at_tenth) >= 0.98
    assert statistics.fmean(at_tenth) > statistics.fmean(run.ratio_at(tenth) for run in randomly.runs)
    assert model.worst_ratio >= 0.93 and model.time_fraction < 0.15  # and then it stops by itself


def test_it_learns_where_configs_fail_and_stops_proposing_them() -> None:
    def times(config: Config, effort: float) -> float | None:
        return None if config.kwargs["BLOCK_M"] >= 128 else bowl(config, effort)

    configs = BOWL_SPACE.configs()
    bench = Bench(times)
    trace = run_search(make_strategy("model", configs, space=BOWL_SPACE, seed=0), bench.measure)
    assert sum(times(c, 1.0) is None for c in configs) / len(configs) == 0.4
    guided = trace.evaluations[32:]  # after its 32 random configs
    assert len(guided) >= 48
    assert sum(not e.result.ok for e in guided) / len(guided) < 0.1
    assert trace.best is not None and trace.best.config == OPTIMUM


def test_without_scikit_learn_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.ensemble", None)
    with pytest.raises(ConfigError, match=r"needs scikit-learn: pip install 'kernelpick\[search\]'"):
        make_strategy("model", BOWL_SPACE.configs())

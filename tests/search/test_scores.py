"""Every strategy scored on every recorded GPU space in tests/data/search/ (replayed on the CPU):
exhaustive finds the true best, random search keeps to its budget, the guided searches come within
5% of the true best, and the model-guided search within 2% in at most a tenth of exhaustive's time."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpick.search import Budget, strategy_names
from kernelpick.search.replay import RecordedSpace, score

RECORDED = sorted((Path(__file__).parents[1] / "data" / "search").glob("*.json"))
NONE_YET = pytest.mark.skip(
    reason="no recorded spaces in tests/data/search/ yet: bench/search.py records them on a GPU"
)
FILES = [pytest.param(path, id=path.stem) for path in RECORDED] or [pytest.param(None, marks=NONE_YET)]
SEEDS = (0, 1, 2)
#: The least ratio of the true best each strategy's pick must reach, with every seed.
FLOOR = {"exhaustive": 1.0, "random": 0.0, "halving": 0.95, "pattern": 0.95, "model": 0.98}


@pytest.fixture(scope="module")
def loaded() -> dict[Path, RecordedSpace]:
    return {path: RecordedSpace.load(path) for path in RECORDED}


@pytest.mark.parametrize("name", strategy_names())
@pytest.mark.parametrize("path", FILES)
def test_every_strategy_on_every_recorded_space(
    path: Path, name: str, loaded: dict[Path, RecordedSpace]
) -> None:
    recorded = loaded[path]
    budget = Budget(max_evaluations=len(recorded) // 10) if name == "random" else None
    scored = score(name, recorded, budget, seeds=(0,) if name == "exhaustive" else SEEDS)
    assert scored.worst_ratio >= FLOOR[name] and scored.worst_ratio > 0, [run.ratio for run in scored.runs]
    if budget is not None:
        assert [run.evaluations for run in scored.runs] == [budget.max_evaluations] * len(SEEDS)


@pytest.mark.parametrize("path", FILES)
def test_the_model_guided_search_comes_within_2_percent_of_the_best_in_a_tenth_of_exhaustives_time(
    path: Path, loaded: dict[Path, RecordedSpace]
) -> None:
    scored = score("model", loaded[path], None, seeds=SEEDS)
    reached = [round(run.seconds_to(0.98) / scored.exhaustive_seconds, 3) for run in scored.runs]
    assert scored.time_fraction_to(0.98) <= 0.10, (
        f"0.98x of the true best reached at {reached} of exhaustive's time"
    )

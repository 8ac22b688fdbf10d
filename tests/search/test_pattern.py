"""search/pattern.py: walkers, each from the best of a few random configs, step along one
dimension at a time to neighbouring values (the next power of two, warps, stages), move to what is
faster, and find the optimum of a bowl; one batch holds every walker's poll."""

from __future__ import annotations

from kernelpick.config import Config
from kernelpick.search import make_strategy, run_search
from kernelpick.search.base import Evaluation
from kernelpick.search.grid import Grid
from kernelpick.search.pattern import PatternSearch
from kernelpick.search.space import Space
from tests.search.synthetic import BOWL_SPACE, OPTIMUM, Bench, bowl, gemm_space, recorded_gemm


def _timed(bench: Bench, configs: tuple[Config, ...]) -> tuple[Evaluation, ...]:
    return tuple(Evaluation(c, r, 1.0) for c, r in bench.measure(configs, 1.0).items())


def _one_step(grid: Grid, centre: Config, config: Config) -> bool:
    moves = [a - b for a, b in zip(grid.point(config), grid.point(centre))]
    return sum(1 for d in moves if d) == 1


def test_the_first_batch_starts_every_walker_and_the_second_holds_every_walkers_poll() -> None:
    search = make_strategy("pattern", BOWL_SPACE.configs(), space=BOWL_SPACE, seed=4)
    assert isinstance(search, PatternSearch)
    bench = Bench(bowl)
    first = search.propose(())
    assert first is not None and len(set(first.configs)) == search.walkers * search.starts
    history = _timed(bench, first.configs)
    second = search.propose(history)
    # each walker's centre: the fastest of its own starts; its poll: the neighbours two steps away
    grid = Grid(BOWL_SPACE.configs(), BOWL_SPACE)
    groups = [first.configs[i : i + search.starts] for i in range(0, len(first.configs), search.starts)]
    centres = [min(group, key=lambda c: bowl(c, 1.0)) for group in groups]
    polls = {c for centre in centres for c in grid.neighbours(centre, search.first_step)}
    assert second is not None and set(second.configs) == polls - set(first.configs)


def test_every_later_config_is_a_walkers_neighbour_or_a_fresh_start() -> None:
    bench = Bench(bowl)
    search = make_strategy("pattern", BOWL_SPACE.configs(), space=BOWL_SPACE, seed=4)
    trace = run_search(search, bench.measure)
    grid = Grid(BOWL_SPACE.configs(), BOWL_SPACE)
    timed: list[Config] = []
    fresh_starts = 0
    for batch, _ in bench.batches:
        near = [c for c in batch if any(_one_step(grid, centre, c) for centre in timed)]
        fresh_starts += len(batch) - len(near)
        timed += batch
    # nine starts of four configs at most (a start may land beside what is timed: then it counts as near)
    assert fresh_starts <= (PatternSearch.restarts + 1) * PatternSearch.starts
    assert len(bench.batches) >= 4
    assert trace.best is not None and trace.best.config == OPTIMUM


def test_walkers_at_once_take_fewer_batches_than_one_walker_for_as_good_a_pick() -> None:
    space = gemm_space()
    configs = space.configs()
    target = recorded_gemm(2048, 4096, 4096)
    batches = {}
    for walkers in (1, 4):
        strategy = type("Walkers", (PatternSearch,), {"walkers": walkers})
        bench = Bench(lambda c, effort: target.entries[c].median_ms)
        trace = run_search(strategy(configs, space=space, seed=0), bench.measure)
        assert trace.best is not None and trace.best.result.cost_ms <= 1.05 * target.best_ms
        batches[walkers] = len(bench.batches)
    assert batches[4] < batches[1] / 2, batches


def test_the_best_so_far_walks_towards_the_optimum() -> None:
    bench = Bench(bowl)
    trace = run_search(
        make_strategy("pattern", BOWL_SPACE.configs(), space=BOWL_SPACE, seed=0), bench.measure
    )
    times = [ms for _, ms in trace.curve()]
    assert times == sorted(times, reverse=True) and times[-1] == bowl(OPTIMUM, 1.0)
    assert trace.used < len(BOWL_SPACE.configs()) / 2  # found without timing most of the space


def test_neighbours_left_out_by_a_constraint_are_never_proposed() -> None:
    space = Space(
        BLOCK_M=[16, 32, 64, 128, 256],
        BLOCK_N=[16, 32, 64, 128, 256],
        num_warps=[2, 4, 8],
        num_stages=[2, 3, 4, 5],
        constraint=lambda c: c["BLOCK_M"] * c["BLOCK_N"] <= 64 * 64,
    )
    bench = Bench(bowl)
    trace = run_search(make_strategy("pattern", space.configs(), space=space, seed=2), bench.measure)
    assert all(
        c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 64 * 64 for batch, _ in bench.batches for c in batch
    )
    assert trace.best is not None and trace.best.config.kwargs in (
        {"BLOCK_M": 64, "BLOCK_N": 64},
        {"BLOCK_M": 32, "BLOCK_N": 128},
    )

"""tune/search/pattern.py: from the best of a few random configs, steps along one dimension at a
time to neighbouring values (the next power of two, warps, stages), moves to what is faster, and
finds the optimum of a bowl."""

from __future__ import annotations

from kernelpick.tune.config import Config
from kernelpick.tune.search import make_strategy, run_search
from kernelpick.tune.search.grid import Grid
from kernelpick.tune.space import Space
from tests.tune.search.synthetic import BOWL_SPACE, OPTIMUM, Bench, bowl


def test_each_poll_moves_one_dimension_by_the_step_from_a_centre_already_timed() -> None:
    bench = Bench(bowl)
    trace = run_search(
        make_strategy("pattern", BOWL_SPACE.configs(), space=BOWL_SPACE, seed=4), bench.measure
    )
    grid = Grid(BOWL_SPACE.configs(), BOWL_SPACE)
    timed: list[Config] = []
    polls = 0
    for batch, _ in bench.batches:
        points = [grid.point(c) for c in batch]

        def one_step(centre: Config, points: list[tuple[int, ...]] = points) -> bool:
            origin = grid.point(centre)
            moves = [[a - b for a, b in zip(point, origin)] for point in points]
            return (
                all(sum(1 for d in move if d) == 1 for move in moves)
                and len({abs(d) for move in moves for d in move if d}) == 1
            )

        if any(one_step(centre) for centre in timed):
            polls += 1
        else:
            assert len(batch) == 4  # a fresh start: four random configs
        timed += batch
    assert polls >= 3
    assert trace.best is not None and trace.best.config == OPTIMUM


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

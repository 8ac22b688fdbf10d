"""A tuning's search: a strategy proposes which configs of each config space are timed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.engine.choice import Choice, searched_as
from kernelpick.search.base import latest
from kernelpick.search.run import SearchTrace
from kernelpick.search.searching import search
from kernelpick.search.space import Space


def searched_spaces(choices: Sequence[Choice], always: set[str]) -> dict[str, dict[Config, Choice]]:
    """The spaces among `choices` that have several configs, by name, each choice by its config.
    Choices whose digest is in `always`, and choices of no config, belong to none."""
    spaces: dict[int, tuple[str, dict[Config, Choice]]] = {}
    for choice in choices:
        placed = searched_as(choice)
        if placed is None or choice.digest in always:
            continue
        config, identity, name = placed
        by_config = spaces.setdefault(identity, (name, {}))[1]
        by_config.setdefault(config, choice)  # an equal config twice renders one choice: expand drops it
    found: dict[str, dict[Config, Choice]] = {}
    for name, by_config in spaces.values():
        if len(by_config) > 1:  # two spaces of one name: traces apart
            found[f"{name} ({len(found) + 1})" if name in found else name] = by_config
    return found


def search_choices(
    strategy: str,
    choices: Sequence[Choice],
    stored: Mapping[str, BenchmarkResult],
    measure: Callable[[list[Choice]], Mapping[str, BenchmarkResult]],
    reference: str | None,
    structure: Space | None = None,
) -> tuple[dict[str, BenchmarkResult], dict[str, SearchTrace]]:
    """Search each space of `choices` with the named strategy (budget and seed from the settings), then
    measure the final round together: the choices outside the searched spaces and each space's
    `max(1, KERNELPICK_CONFIRM_TOP)` best the store lacks, unless that is one choice timed already.

    Args:
        strategy: a strategy's name, not "exhaustive".
        choices: every candidate of the tuning.
        stored: the results the store holds, by digest: never timed again.
        measure: compiles, verifies and times choices; each one's result by digest.
        reference: the digest of the candidate kept unless clearly beaten: always timed.
        structure: the dimensions of a tuned kernel's `Space` (None: a space's configs show them).

    Returns:
        A result for every choice stored or timed (by digest), and each searched space's trace.
    """
    spaces = searched_spaces(choices, {reference} if reference is not None else set())
    results = dict(stored)
    traces: dict[str, SearchTrace] = {}
    for name, space in spaces.items():

        def timed(
            batch: Sequence[Config], space: dict[Config, Choice] = space
        ) -> dict[Config, BenchmarkResult]:  # `measure` for configs of the space, as `search` calls it
            found = measure([space[config] for config in batch])
            return {config: found[space[config].digest] for config in batch}

        known = {config: stored[c.digest] for config, c in space.items() if c.digest in stored}
        traces[name] = trace = search(strategy, list(space), known, timed, structure)
        results.update((space[config].digest, r) for config, r in trace.results().items())
    searched = {c.digest for space in spaces.values() for c in space.values()}
    finalists = [c for c in choices if c.digest not in searched]
    top = max(1, settings.current().confirm_top)
    finalists += [space[config] for name, space in spaces.items() for config in _best(traces[name], top)]
    todo = [c for c in finalists if c.digest not in stored]
    if len(todo) > 1 or any(c.digest not in results for c in todo):
        results.update(measure(todo))
    return results, traces


def _best(trace: SearchTrace, count: int) -> list[Config]:
    """The `count` fastest configs that worked, those timed at the highest effort first (a quick,
    noisy timing does not outrank a full one)."""
    working = [e for e in latest(trace.evaluations).values() if e.result.ok]
    working.sort(key=lambda e: (-e.effort, e.result.cost_ms))
    return [e.config for e in working[:count]]

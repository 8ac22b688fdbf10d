"""The thin base of every search strategy, and the plain data strategies and searches exchange."""

from __future__ import annotations

import abc
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.space import Space


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One config timed during a search: its result, when it came (seconds since the search began)
    and the effort it was timed at (1.0: a full timing; less: quicker and noisier)."""

    config: Config
    result: BenchmarkResult
    seconds_at: float
    effort: float = 1.0


@dataclass(frozen=True, slots=True)
class Batch:
    """Configs a strategy wants timed next, together, at `effort` (0 < effort <= 1) of a full timing.

    Raises:
        ConfigError: no configs, or an effort outside (0, 1].
    """

    configs: tuple[Config, ...]
    effort: float = 1.0

    def __post_init__(self) -> None:
        if not self.configs:
            raise ConfigError("a Batch needs at least one config; a strategy that is done returns None")
        if not 0 < self.effort <= 1:
            raise ConfigError(f"a Batch's effort must be in (0, 1], got {self.effort!r}")


@dataclass(frozen=True, slots=True)
class Budget:
    """How much a search may spend: timings (`max_evaluations`) and seconds; None is no limit.

    A search stops proposing once either is spent; the batch under way when the seconds run out
    finishes, so a search may overrun its seconds by one batch.

    Raises:
        ConfigError: a limit that is not positive.
    """

    max_evaluations: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_evaluations is not None and self.max_evaluations < 1:
            raise ConfigError(
                f"Budget max_evaluations must be at least 1 (or None), got {self.max_evaluations}"
            )
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ConfigError(f"Budget max_seconds must be positive (or None), got {self.max_seconds}")

    @classmethod
    def from_settings(cls, space_size: int) -> Budget:
        """The budget KERNELPICK_SEARCH_BUDGET and KERNELPICK_SEARCH_SECONDS set for a space of
        `space_size` configs: a budget under 1 is that fraction of the space (at least one config)."""
        current = settings.current()
        fraction_or_count = current.search_budget
        evaluations = None
        if fraction_or_count >= 1:
            evaluations = int(fraction_or_count)
        elif fraction_or_count > 0:
            evaluations = max(1, math.ceil(fraction_or_count * space_size))
        return cls(evaluations, current.search_seconds or None)


class SearchStrategy(abc.ABC):
    """Proposes which configs to time next from what has been timed so far; never times anything.

    Args:
        candidates: the configs it may propose (duplicates are dropped, the order kept).
        space: the `Space` they come from, for its typed dimensions; without one, the dimensions
            are read off the candidates.
        seed: seeds every random draw, so a search with the same seed and results repeats itself.
        budget: what the search may spend, for strategies that plan around it.

    Raises:
        ConfigError: no candidates.
    """

    name: ClassVar[str]

    def __init__(
        self,
        candidates: Sequence[Config],
        *,
        space: Space | None = None,
        seed: int = 0,
        budget: Budget | None = None,
    ) -> None:
        if not candidates:
            raise ConfigError(f"the {self.name} search needs at least one candidate config, got none")
        self.candidates = tuple(dict.fromkeys(candidates))
        self.space = space
        self.seed = seed
        self.budget = budget or Budget()
        self.random = random.Random(seed)
        self.prepare()

    def prepare(self) -> None:
        """Set up what the strategy needs from its candidates; called once they are known (a
        strategy that needs nothing leaves it be)."""
        return None

    @abc.abstractmethod
    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        """The next configs to time, given every evaluation so far (oldest first); None when done."""


def latest(history: Sequence[Evaluation]) -> dict[Config, Evaluation]:
    """Each config's evaluation at the highest effort it was timed at (the later one at equal effort)."""
    found: dict[Config, Evaluation] = {}
    for evaluation in history:
        known = found.get(evaluation.config)
        if known is None or evaluation.effort >= known.effort:
            found[evaluation.config] = evaluation
    return found


def best(history: Sequence[Evaluation]) -> Evaluation | None:
    """The fastest working evaluation among those at the highest effort any working one reached
    (quick, noisy timings do not outrank full ones); None when nothing worked."""
    working = [e for e in history if e.result.ok]
    if not working:
        return None
    top = max(e.effort for e in working)
    return min((e for e in working if e.effort == top), key=lambda e: e.result.cost_ms)

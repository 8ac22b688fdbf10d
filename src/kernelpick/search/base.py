"""The thin base of every search strategy, and the plain data strategies and searches exchange."""

from __future__ import annotations

import abc
import difflib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from kernelpick import settings
from kernelpick.bench.result import BenchmarkResult
from kernelpick.config import Config
from kernelpick.errors import ConfigError
from kernelpick.search.options import COMMON_OPTIONS, Option
from kernelpick.search.space import Space
from kernelpick.search.spec import SearchSpec


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
        return cls.of(current.search_budget, current.search_seconds, space_size)

    @classmethod
    def of(cls, fraction_or_count: float, seconds: float, space_size: int) -> Budget:
        """A budget as the settings and the `budget` and `seconds` options write it: a count of
        timings, or under 1 that fraction of `space_size` (at least one); 0 is no limit."""
        evaluations = None
        if fraction_or_count >= 1:
            evaluations = int(fraction_or_count)
        elif fraction_or_count > 0:
            evaluations = max(1, math.ceil(fraction_or_count * space_size))
        return cls(evaluations, seconds or None)


class SearchStrategy(abc.ABC):
    """Proposes which configs to time next from what has been timed so far; never times anything.

    Args:
        candidates: the configs it may propose (duplicates are dropped, the order kept).
        space: the `Space` they come from, for its typed dimensions; without one, the dimensions
            are read off the candidates.
        seed: seeds every random draw, so a search with the same seed and results repeats itself.
        budget: what the search may spend, for strategies that plan around it.

    A strategy declares its options as class attributes, `batch_size = Option(16, "...")`, and reads
    them as `self.batch_size`; a class made by `configured` carries values for them (and for the
    `COMMON_OPTIONS`, which replace `seed` and `budget`'s limits).

    Raises:
        ConfigError: no candidates.
    """

    #: How `search=` names the strategy: its registered name, with options where it was configured.
    name: ClassVar[str]
    #: Option values this class was configured with (`configured`); the others keep their defaults.
    preset: ClassVar[Mapping[str, object]] = MappingProxyType({})

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
        preset = self.preset
        self.seed: int = preset.get("seed", seed)  # type: ignore[assignment]  # checked by `configured`
        self.budget = _limited(budget or Budget(), preset, len(self.candidates))
        for option in self.declared_options():
            # The class's value: the default, or what a subclass sets in its place (`walkers = 1`).
            setattr(self, option.name, preset.get(option.name, getattr(type(self), option.name)))
        self.random = random.Random(self.seed)
        self.prepare()

    @classmethod
    def declared_options(cls) -> tuple[Option[Any], ...]:
        """The options the strategy declares (not the `COMMON_OPTIONS`), in declaration order."""
        found: dict[str, Option[Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update((name, value) for name, value in vars(klass).items() if isinstance(value, Option))
        return tuple(found.values())

    @classmethod
    def configured(cls, options: Mapping[str, object]) -> type[SearchStrategy]:
        """A subclass whose instances take `options`, named as `search=` writes them
        (`model(initial=16)`), so that a front that keeps a strategy's name keeps its options too;
        the class itself when no option is set.

        Raises:
            ConfigError: an option the strategy does not have (the message lists those it has), or
                a value of the wrong type.
        """
        if cls.preset:  # configured already: configure the class it was made from
            made_from: type[SearchStrategy] = cls.__mro__[1]
            return made_from.configured({**cls.preset, **options})
        declared = {option.name: option for option in (*COMMON_OPTIONS, *cls.declared_options())}
        given = dict(options)
        for option, value in given.items():
            if option not in declared:
                close = difflib.get_close_matches(option, declared, n=1)
                raise ConfigError(
                    f"search strategy {cls.name!r} has no option {option!r}"
                    f"{f' (did you mean {close[0]!r}?)' if close else ''}: "
                    f"its options are {', '.join(declared)}"
                )
            given[option] = declared[option].check(value, cls.name)
        # None, a common option's default, is as good as unset: the settings' value.
        ordered = SearchSpec(cls.name, tuple((n, given[n]) for n in declared if given.get(n) is not None))
        if not ordered.options:
            return cls
        attributes = {"name": str(ordered), "preset": MappingProxyType(dict(ordered.options))}
        return type(
            cls.__name__, (cls,), {**attributes, "__module__": cls.__module__, "__doc__": cls.__doc__}
        )

    def prepare(self) -> None:
        """Set up what the strategy needs from its candidates; called once they are known (a
        strategy that needs nothing leaves it be)."""
        return None

    @abc.abstractmethod
    def propose(self, history: Sequence[Evaluation]) -> Batch | None:
        """The next configs to time, given every evaluation so far (oldest first); None when done."""


def _limited(budget: Budget, preset: Mapping[str, object], candidates: int) -> Budget:
    """`budget` with the limits the `budget` and `seconds` options set in its place."""
    if "budget" not in preset and "seconds" not in preset:
        return budget
    limits = Budget.of(preset.get("budget") or 0, preset.get("seconds") or 0, candidates)  # type: ignore[arg-type]
    return Budget(
        limits.max_evaluations if "budget" in preset else budget.max_evaluations,
        limits.max_seconds if "seconds" in preset else budget.max_seconds,
    )


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

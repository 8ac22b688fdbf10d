"""A search strategy's options declared as data (name, type, default, one-line doc), and their checks."""

from __future__ import annotations

import math
from typing import Any, Generic, TypeVar

from kernelpick.errors import ConfigError

T = TypeVar("T")

#: What each option type is called in the docs, and what a value of it is called in errors.
TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str"}
_EXPECTED = {bool: "True or False", int: "an int", float: "a finite number", str: "a string"}


class Option(Generic[T]):
    """One option of a search strategy, declared as a class attribute of the strategy.

    `batch_size = Option(16, "Configs timed per batch.", minimum=1)` declares the option
    `batch_size`, an int; the strategy reads its value as `self.batch_size` (the default, or what
    the user set: `search="random(batch_size=4)"`), and the class attribute reads the default.

    Args:
        default: the value when the user sets none; its type is the option's (unless `kind` says).
        doc: one line for docs/search.md and `--help`-like listings.
        kind: the option's type where the default does not show it (a default of None).
        minimum: the smallest value a number may take.
        name: the option's name where it is no class attribute (else the attribute's).
    """

    __slots__ = ("default", "doc", "kind", "minimum", "name")

    def __init__(
        self,
        default: T,
        doc: str,
        *,
        kind: type | None = None,
        minimum: float | None = None,
        name: str = "",
    ) -> None:
        self.default = default
        self.doc = doc
        self.kind: type = kind or type(default)
        self.minimum = minimum
        self.name = name
        if self.kind not in TYPE_NAMES:
            raise TypeError(
                f"a search option is one of {', '.join(TYPE_NAMES.values())}, not {self.kind.__name__}"
            )

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type) -> T:
        # A strategy sets each option on itself when made; this is the class's (or an unset) value.
        return self.default

    @property
    def type_name(self) -> str:
        """The option's type as the docs write it: int, float, bool or str (`| None` when None is its default)."""
        return TYPE_NAMES[self.kind] + (" | None" if self.default is None else "")

    def check(self, value: object, strategy: str) -> Any:
        """`value` if the option can take it (an int for a float too).

        Raises:
            ConfigError: a value of another type, or under the minimum; the message says what was expected.
        """
        if value is None and self.default is None:
            return value
        if self.kind is float:
            fits = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        elif self.kind is int:
            fits = isinstance(value, int) and not isinstance(value, bool)
        else:
            fits = isinstance(value, self.kind)
        if not fits:
            expected = _EXPECTED[self.kind]
            raise ConfigError(
                f"option {self.name!r} of search strategy {strategy!r} takes {expected}"
                f"{' or None' if self.default is None else ''}, got {value!r} ({type(value).__name__})"
            )
        if self.minimum is not None and value < self.minimum:  # type: ignore[operator]
            raise ConfigError(
                f"option {self.name!r} of search strategy {strategy!r} must be at least {self.minimum:g}, got {value!r}"
            )
        return value


#: Options every strategy takes: for this search alone, what the settings give every search.
COMMON_OPTIONS: tuple[Option[Any], ...] = (
    Option(
        None,
        "Most configs timed (0: no limit; under 1: that fraction of the candidates); "
        "default: KERNELPICK_SEARCH_BUDGET.",
        kind=float,
        minimum=0,
        name="budget",
    ),
    Option(
        None,
        "Most seconds spent (0: no limit); default: KERNELPICK_SEARCH_SECONDS.",
        kind=float,
        minimum=0,
        name="seconds",
    ),
    Option(None, "Seed of the random draws; default: KERNELPICK_SEARCH_SEED.", kind=int, name="seed"),
)

"""A search as users write it: a strategy's name with options, `"model(budget=0.1)"` or a mapping."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

from kernelpick.errors import ConfigError

#: What `search=` takes: a name, `"name(option=value, ...)"`, `{"name": ..., option: value}` or a spec.
SearchArgument = Union[str, Mapping[str, object], "SearchSpec"]

_FORMS = "a strategy's name, 'name(option=value, ...)' or a mapping {'name': name, option: value}"


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """A search strategy's name and the options set for it (the others keep their defaults).

    `str(spec)` writes it as `search=` takes it: `model(budget=0.1, initial=16)`, or the bare name.
    """

    name: str
    options: tuple[tuple[str, object], ...] = ()

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return f"{self.name}({', '.join(f'{option}={value!r}' for option, value in self.options)})"

    @classmethod
    def of(cls, search: SearchArgument) -> SearchSpec:
        """`search` read as written, not yet checked against the strategy (`registry.search_spec` checks).

        Raises:
            ConfigError: `search` is none of the forms, or an option is set twice.
        """
        if isinstance(search, SearchSpec):
            return search
        if isinstance(search, str):
            return _parse(search)
        if isinstance(search, Mapping):
            name = search.get("name")
            if not isinstance(name, str):
                raise ConfigError(
                    f"search={dict(search)!r} names no strategy: a mapping names it under 'name', "
                    "e.g. {'name': 'model', 'budget': 0.1}"
                )
            options = [(key, value) for key, value in search.items() if key != "name"]
            wrong = [key for key, _ in options if not isinstance(key, str)]
            if wrong:
                raise ConfigError(f"search={dict(search)!r}: option names are strings, got {wrong[0]!r}")
            return cls(name, tuple(options))
        raise ConfigError(f"search= takes {_FORMS}; got {type(search).__name__} {search!r}")


def _parse(text: str) -> SearchSpec:
    """`name` or `name(option=value, ...)`, each value a Python literal (number, True, None, 'text')."""
    if "(" not in text:
        return SearchSpec(text.strip())
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        call = None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args):
        raise ConfigError(f"search={text!r} is not {_FORMS}: write e.g. 'model(budget=0.1, initial=16)'")
    options: dict[str, object] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ConfigError(f"search={text!r}: set each option by name, as option=value")
        if keyword.arg in options:
            raise ConfigError(f"search={text!r} sets option {keyword.arg!r} twice")
        try:
            options[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            raise ConfigError(
                f"search={text!r}: option {keyword.arg!r} is set to {ast.unparse(keyword.value)}, "
                "which is no value: write a number, True, False, None or a quoted string"
            ) from None
    return SearchSpec(call.func.id, tuple(options.items()))

"""search/spec.py: a search as users write it, `"model(budget=0.1)"` or a mapping, read as written."""

from __future__ import annotations

import pytest

from kernelpick.errors import ConfigError
from kernelpick.search import SearchSpec


def test_a_name_a_call_and_a_mapping_read_alike() -> None:
    expected = SearchSpec("model", (("budget", 0.1), ("initial", 16)))
    assert SearchSpec.of("model(budget=0.1, initial=16)") == expected
    assert SearchSpec.of(" model( budget = 0.1 ,initial=16 ) ") == expected
    assert SearchSpec.of({"name": "model", "budget": 0.1, "initial": 16}) == expected
    assert SearchSpec.of(expected) is expected
    assert SearchSpec.of("random") == SearchSpec.of("random()") == SearchSpec.of({"name": "random"})


def test_values_are_python_literals() -> None:
    spec = SearchSpec.of("x(a=-2, b=1e-3, c=True, d=None, e='text')")
    assert spec.options == (("a", -2), ("b", 1e-3), ("c", True), ("d", None), ("e", "text"))


def test_a_spec_is_written_back_as_search_takes_it() -> None:
    assert str(SearchSpec("model", (("budget", 0.1), ("initial", 16)))) == "model(budget=0.1, initial=16)"
    assert str(SearchSpec("random")) == "random"
    written = SearchSpec("x", (("e", "text"), ("c", False)))
    assert SearchSpec.of(str(written)) == written


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ("model(0.1)", r"search='model\(0.1\)' is not a strategy's name, 'name\(option=value, \.\.\.\)'"),
        ("model(budget=", r"write e.g. 'model\(budget=0.1, initial=16\)'"),
        ("model.x(budget=1)", "is not a strategy's name"),
        ("model(**extra)", "set each option by name, as option=value"),
        ("model(budget=1, budget=2)", "sets option 'budget' twice"),
        ("model(budget=tenth)", "option 'budget' is set to tenth, which is no value: write a number"),
        ({"budget": 0.1}, "names no strategy: a mapping names it under 'name'"),
        ({"name": "model", 1: 2}, "option names are strings, got 1"),
        (3, "search= takes a strategy's name, .* got int 3"),
    ],
)
def test_what_is_no_search_is_refused_saying_what_is(search: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SearchSpec.of(search)  # type: ignore[arg-type]

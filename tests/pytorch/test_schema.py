"""Schemas: inferred from annotations or given, with exactly the inferred mutations written in."""

from __future__ import annotations

import functools

import pytest
import torch

from kernelpick.errors import OperatorError
from kernelpick.pytorch import schema


def annotated(
    x: torch.Tensor, ys: list[torch.Tensor], bias: torch.Tensor | None, n: int, *, out: torch.Tensor
) -> torch.Tensor:
    return x


def test_mutations_are_annotated_on_tensor_list_and_optional_arguments() -> None:
    base = schema.base_schema("t::f", annotated, None)
    text = schema.with_mutations("t::f", base, ("ys", "bias", "out"))
    assert schema.declared_mutations("t::f", text) == ("ys", "bias", "out")
    assert schema.tensor_parameters("t::f", base) == ("x", "ys", "bias", "out")
    assert schema.keyword_only("t::f", base) == ("out",)
    assert schema.with_mutations("t::f", text, ()) == base


def test_a_given_schema_gets_annotations_where_needed() -> None:
    given = "(Tensor x, Tensor xx, int n) -> Tensor"
    text = schema.with_mutations("t::g", given, ("x",))
    assert text == "(Tensor(a0!) x, Tensor xx, int n) -> Tensor"


def test_only_tensors_can_be_marked_written() -> None:
    with pytest.raises(OperatorError, match=r"only Tensor, Tensor\? and Tensor\[\] arguments"):
        schema.with_mutations("t::g", "(Tensor x, int n) -> Tensor", ("n",))


def test_bad_schemas_and_missing_annotations_say_what_to_do() -> None:
    with pytest.raises(OperatorError, match=r"does not parse"):
        schema.base_schema("t::g", annotated, "(Tensor x -> Tensor")

    def bare(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(OperatorError, match=r"cannot infer a schema.*Annotate every parameter"):
        schema.base_schema("t::g", bare, None)


def test_a_callable_without_annotations_to_read_says_to_pass_a_schema_or_wrap_it() -> None:
    # a partial has a signature but no annotations or globals for torch.library.infer_schema
    partial = functools.partial(annotated, n=3)
    with pytest.raises(
        OperatorError, match=r"from a partial object, which is not a Python function.*schema="
    ):
        schema.base_schema("t::g", partial, None)
    assert schema.base_schema("t::g", partial, "(Tensor x) -> Tensor") == "(Tensor x) -> Tensor"


def test_an_operator_of_a_builtin_is_refused_with_a_function_to_write() -> None:
    import kernelpick

    with pytest.raises(OperatorError, match=r"`torch.add` has no Python signature.*def add\(x: torch.Tensor"):
        kernelpick.op("t::builtin_add", torch.add)
    with pytest.raises(OperatorError, match=r"`torch.add` has no Python signature"):
        kernelpick.op("t::builtin_add", torch.add, schema="(Tensor x, Tensor y) -> Tensor")


def test_bind_applies_defaults_and_reports_misfits() -> None:
    def f(x: torch.Tensor, n: int = 3) -> None: ...

    assert schema.bind(f, (1,), {}) == {"x": 1, "n": 3}
    with pytest.raises(OperatorError, match=r"cannot be called with these arguments"):
        schema.bind(f, (), {"y": 1})

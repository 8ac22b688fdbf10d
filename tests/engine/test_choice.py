"""Tests of the choice protocol and extern choices."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from kernelpick import extern
from kernelpick.bench.inputs import Example
from kernelpick.engine.choice import Choice, ChoiceSpace, compile_choices, qualified_name, short_hash
from kernelpick.engine.signature import Signature
from kernelpick.errors import ConfigError


def test_an_extern_is_a_choice_and_a_space_of_one() -> None:
    choice = extern(torch.mm)
    signature = Signature.of((torch.empty(2, 2), torch.empty(2, 2)), {})
    assert isinstance(choice, Choice) and isinstance(choice, ChoiceSpace)
    assert choice.choices_for(signature) == [choice]
    assert choice.name == "torch.mm"
    assert choice.description() == {
        "kind": "extern",
        "name": "torch.mm",
        "callable": "torch.mm",
        "out_variant": False,
    }
    assert compile_choices([choice], Example((torch.empty(2),), {}), signature)[0].ok
    assert choice.callable_for(signature) is torch.mm


def test_the_digest_follows_the_callables_qualified_name() -> None:
    def local(a: torch.Tensor) -> torch.Tensor:
        return a

    assert extern(torch.mm).digest == extern(torch.mm).digest
    assert extern(torch.mm).digest != extern(torch.bmm).digest
    assert extern(torch.mm).digest != extern(torch.mm, name="cublas").digest
    assert qualified_name(local).endswith(
        "test_the_digest_follows_the_callables_qualified_name.<locals>.local"
    )
    assert "partial(torch.add" in qualified_name(functools.partial(torch.add, alpha=2))


def test_the_digest_of_a_python_function_follows_its_code_and_closure() -> None:
    """A stored "ok" is trusted only for an equal digest: a factory's function made for another scale,
    or a function edited since, must be verified again."""

    def scaled(s: float) -> Any:
        def fast(x: torch.Tensor) -> torch.Tensor:
            return x * s

        return fast

    assert extern(scaled(2.0)).digest == extern(scaled(2.0)).digest
    assert extern(scaled(2.0)).digest != extern(scaled(3.0)).digest
    made = {}
    for source, rank in (("x * 2", 0), ("x * 3", 0), ("x * 2", 1)):
        namespace: dict[str, Any] = {"__name__": "users_ops", "RANK": rank}
        exec(f"def fast(x):\n    return {source} + RANK", namespace)  # one module, edited; two ranks
        made[source, rank] = extern(namespace["fast"]).digest
    assert made["x * 2", 0] != made["x * 3", 0]
    assert made["x * 2", 0] == made["x * 2", 1]  # a job's ranks list the same choices
    # Functions without Python code keep the digest they always had: stores written before stay valid.
    assert extern(torch.mm).digest == short_hash("extern", "torch.mm", "torch.mm")


def test_an_extern_needs_a_callable() -> None:
    with pytest.raises(ConfigError, match="expects a callable"):
        extern(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"extern\(out=...\) expects a callable"):
        extern(torch.mm, out="mm")  # type: ignore[arg-type]

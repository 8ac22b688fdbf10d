"""Tests of partial renders finished by hooks, and of epilogues."""

from __future__ import annotations

import pytest

from kernelpick.errors import TemplateError
from kernelpick.select.render import Epilogue, PartialRender


def test_a_placeholder_alone_on_its_line_takes_the_lines_indentation() -> None:
    code = "def f():\n    <BODY>\n    return x\n"
    done = PartialRender(code, {"<BODY>": lambda: "x = 1\nif x:\n    x = 2\n"}).finalize()
    assert done == "def f():\n    x = 1\n    if x:\n        x = 2\n    return x\n"


def test_an_inline_placeholder_is_replaced_as_it_is() -> None:
    done = PartialRender("def f(<ARGS>):\n    pass\n", {"<ARGS>": lambda: "a, b"}).finalize()
    assert done == "def f(a, b):\n    pass\n"


def test_hooks_run_after_the_body_so_they_see_everything_registered_during_it() -> None:
    registered: list[str] = []
    render = PartialRender(
        "<SIG>\n<BODY>", {"<SIG>": lambda: ", ".join(registered), "<BODY>": lambda: "body"}
    )
    registered += ["A", "bias"]  # what rendering the body registered
    assert render.pending == ["<SIG>", "<BODY>"]
    assert render.finalize() == "A, bias\nbody"


def test_an_empty_hook_removes_its_line() -> None:
    assert PartialRender("a\n  <X>\nb", {"<X>": lambda: ""}).finalize() == "a\nb"


def test_a_hook_finalizes_once() -> None:
    render = PartialRender("<X>", {"<X>": lambda: "x"})
    render.finalize_hook("<X>")
    with pytest.raises(TemplateError, match="already finalized"):
        render.finalize_hook("<X>")
    with pytest.raises(TemplateError, match="no hook"):
        render.finalize_hook("<Y>")


def test_epilogue_renames_acc_and_its_inputs() -> None:
    epilogue = Epilogue("tl.maximum(acc + bias, 0.0)", ("bias",))
    assert epilogue.code({"acc": "tile", "bias": "bias_tile"}) == "tl.maximum(tile + bias_tile, 0.0)"


def test_epilogues_compose_with_then_keeping_precedence() -> None:
    epilogue = Epilogue("acc + bias", ("bias",)).then("acc * tl.sigmoid(acc)", name="bias+silu")
    assert epilogue.expression == "(acc + bias) * tl.sigmoid(acc + bias)"
    assert epilogue.inputs == ("bias",)
    assert epilogue.name == "bias+silu"


def test_an_epilogue_naming_an_undeclared_input_is_refused_with_the_fix() -> None:
    with pytest.raises(TemplateError, match=r"uses scale.*list every tensor it reads in `inputs`"):
        Epilogue("acc * scale")


def test_an_epilogue_that_is_not_an_expression_is_refused() -> None:
    with pytest.raises(TemplateError, match="not a Python expression"):
        Epilogue("acc = acc + 1")

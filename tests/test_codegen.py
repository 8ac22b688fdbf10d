"""Tests of the indented code buffer."""

from __future__ import annotations

import pytest

from kernelpick.codegen import CodeBuffer, indent_block


def test_lines_follow_the_indentation_of_the_block_they_are_written_in() -> None:
    code = CodeBuffer()
    code.line("def f(x):")
    with code.indent():
        code.line("if x:")
        with code.indent():
            code.line("return 1")
        code.line("")
        code.line("return 0")
    assert code.getvalue() == "def f(x):\n    if x:\n        return 1\n\n    return 0\n"
    namespace: dict[str, object] = {}
    exec(code.getvalue(), namespace)
    assert namespace["f"](True) == 1  # type: ignore[operator]


def test_splice_reindents_a_block_to_the_current_level() -> None:
    code = CodeBuffer()
    code.line("for i in range(3):")
    with code.indent():
        code.splice(
            """
                a = i
                if a:
                    b = a
            """
        )
    assert code.getvalue() == "for i in range(3):\n    a = i\n    if a:\n        b = a\n"


def test_line_refuses_several_lines() -> None:
    with pytest.raises(ValueError, match="splice"):
        CodeBuffer().line("a = 1\nb = 2")


def test_indent_is_restored_after_an_error_in_the_block() -> None:
    code = CodeBuffer()
    with pytest.raises(RuntimeError), code.indent():
        raise RuntimeError
    assert code.level == 0


def test_indent_block_leaves_empty_lines_empty() -> None:
    assert indent_block("a\n\nb", "  ") == "  a\n\n  b"

"""STYLE.md's "one line for the module": every module under src/kernelpick opens with a docstring of one
line, at most ruff's line length (which the lint does not check: it ignores E501)."""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "kernelpick"
LINE_LENGTH = 110  # pyproject.toml's [tool.ruff] line-length


def docstring_fault(path: Path) -> str | None:
    """What is wrong with the module docstring of the file at `path`, or None when it is one short line."""
    source = path.read_text()
    tree = ast.parse(source)
    if ast.get_docstring(tree) is None:
        return "no module docstring"
    first = tree.body[0]
    lines = (first.end_lineno or first.lineno) - first.lineno + 1
    if lines > 1:
        return f"a module docstring of {lines} lines"
    width = len(source.splitlines()[first.lineno - 1])
    return f"a module docstring line of {width} characters" if width > LINE_LENGTH else None


def test_every_module_docstring_is_one_line() -> None:
    paths = sorted(SOURCE.rglob("*.py"))
    assert len(paths) > 100  # the walk finds the package
    faults = [f"{path.relative_to(SOURCE)}: {fault}" for path in paths if (fault := docstring_fault(path))]
    assert not faults, "modules whose docstring is not one line (STYLE.md):\n" + "\n".join(faults)

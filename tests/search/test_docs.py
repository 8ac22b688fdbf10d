"""search/docs.py: docs/search.md's options table is the one the strategies' declarations give."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpick.errors import ConfigError
from kernelpick.search import COMMON_OPTIONS, strategy_class, strategy_names
from kernelpick.search.docs import BEGIN, END, main, table, updated

PAGE = Path(__file__).resolve().parents[2] / "docs" / "search.md"


def test_docs_search_md_has_the_options_the_strategies_declare() -> None:
    page = PAGE.read_text()
    assert updated(page) == page, "docs/search.md is out of date: run `python -m kernelpick.search.docs`"


def test_the_table_has_a_row_for_every_option_with_its_type_default_and_doc() -> None:
    rows = table()[2:]
    declared = len(COMMON_OPTIONS) + sum(len(strategy_class(n).declared_options()) for n in strategy_names())
    assert len(rows) == declared
    assert (
        "| `model` | `initial` | int | `32` | Random candidates timed before the model is fitted."
        in "\n".join(rows)
    )
    assert rows[0].startswith("| every strategy | `budget` | float \\| None | `None` | ")


def test_only_the_marked_section_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    path.write_text(f"# Prose\n\nkept\n{BEGIN}\nstale\n{END}\nkept too\n")
    assert main([str(path)]) == 0
    assert path.read_text() == "\n".join(["# Prose", "", "kept", BEGIN, *table(), END, "kept too"]) + "\n"
    with pytest.raises(ConfigError, match="the page has no generated section"):
        updated("# no markers\n")

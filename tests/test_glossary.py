"""docs/glossary.md's "One name per concept" names files that exist: when a module is renamed, moved
or merged away, the glossary says so too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"


def named_paths() -> list[str]:
    """Every `path.py` or `folder/` in backticks in the section, as written, but the names proposed
    ("to be `compile/twins.py`")."""
    section = " ".join(GLOSSARY.read_text().split("## One name per concept", 1)[1].split())
    return re.findall(r"(?<!to be )`((?:[\w.]+/)*[\w.]+\.py|(?:[\w.]+/)+)`", section)


def test_every_file_the_glossary_names_exists() -> None:
    paths = named_paths()
    assert "engine/tuning.py" in paths and "bench/results/" in paths  # the pattern finds them
    missing = [p for p in paths if not (ROOT / "src" / "kernelpick" / p).exists() and not (ROOT / p).exists()]
    assert not missing, f"docs/glossary.md names files that do not exist: {missing}"

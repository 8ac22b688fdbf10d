"""store/origins.py: which of a kernel's sources are superseded, by the functions noted for each source."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from kernelpick.bench.benchmarker import MEASUREMENT_VERSION
from kernelpick.store.keys import TuningKey
from kernelpick.store.origins import (
    Origin,
    note_origin,
    origin_of,
    origins_path,
    read_origins,
    superseded_sources,
)
from tests.store.samples import make_key


def add_kernel() -> None:
    """Stands in for a kernel's function: `note_origin` reads its file and qualified name."""


def noted(cache: Path, cache_key: str, *origins: Origin) -> None:
    """Note `origins` for the source with `cache_key`, as tunings of kernels defined there do."""
    for origin in origins:
        function = SimpleNamespace(
            __code__=SimpleNamespace(co_filename=origin.file), __qualname__=origin.function
        )
        note_origin(cache, SimpleNamespace(fn=function, cache_key=cache_key))


def key(cache_key: str, n: int = 1024, kernel: str = "add_kernel") -> TuningKey:
    return replace(make_key(kernel, n), source=f"{MEASUREMENT_VERSION}:{cache_key}")


MINE, THEIRS = Origin("/work/mine.py", "add_kernel"), Origin("/work/theirs.py", "add_kernel")


def test_a_source_is_superseded_by_a_later_one_of_the_same_function_not_of_a_namesake(tmp_path: Path) -> None:
    noted(tmp_path, "old", MINE)
    noted(tmp_path, "theirs", THEIRS)
    noted(tmp_path, "new", MINE)
    rows = [(key("old", 1), 1.0), (key("old", 2), 3.0), (key("theirs"), 2.0), (key("new"), 4.0)]
    assert superseded_sources(rows, tmp_path) == {("add_kernel", f"{MEASUREMENT_VERSION}:old")}
    # The namesake's rows are older than the new source's and its file's kernel was never edited.
    rows.append((key("old", 3), 5.0))  # the old source stored last (an edit undone, tuned again)
    assert superseded_sources(rows, tmp_path) == {("add_kernel", f"{MEASUREMENT_VERSION}:new")}


def test_a_source_in_two_files_is_superseded_only_once_both_have_newer_sources(tmp_path: Path) -> None:
    noted(tmp_path, "shared", MINE, THEIRS)  # a kernel copied whole: one source, two files
    noted(tmp_path, "mine-edited", MINE)
    rows = [(key("shared"), 1.0), (key("mine-edited"), 2.0)]
    assert superseded_sources(rows, tmp_path) == frozenset()
    noted(tmp_path, "theirs-edited", THEIRS)
    rows.append((key("theirs-edited"), 3.0))
    assert superseded_sources(rows, tmp_path) == {("add_kernel", f"{MEASUREMENT_VERSION}:shared")}


def test_sources_with_nothing_noted_or_of_another_kernel_name_or_a_selector_are_never_superseded(
    tmp_path: Path,
) -> None:
    noted(tmp_path, "new", MINE)
    noted(tmp_path, "renamed", Origin(MINE.file, "add_kernel"))
    rows = [
        (key("unnoted"), 1.0),  # tuned before origins were noted, or with another cache folder
        (key("renamed", kernel="add"), 0.5),  # another kernel name: another kernel
        (replace(make_key("add_kernel"), source="select-1:measure-3"), 0.1),  # a selector's
        (key("new"), 2.0),
    ]
    assert superseded_sources(rows, tmp_path) == frozenset()


def test_origins_are_noted_once_privately_and_read_as_data_only(tmp_path: Path) -> None:
    before = os.umask(0o002)
    try:
        noted(tmp_path, "k", MINE, MINE, THEIRS)
    finally:
        os.umask(before)
    path = origins_path(tmp_path, "k")
    assert read_origins(path) == {MINE, THEIRS}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for planted in (b"[" * 100_000, b'{"file": 1}', b'[{"file": "a", "function": 2}]', b"\xff["):
        path.write_bytes(planted)
        assert read_origins(path) == frozenset()  # no origin: nothing is superseded by it
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text('[{"file": "a", "function": "b"}]')
    assert read_origins(path) == frozenset()  # not through a link


def test_a_kernels_origin_is_its_functions_file_and_qualified_name() -> None:
    assert origin_of(SimpleNamespace(fn=add_kernel)) == Origin(os.path.abspath(__file__), "add_kernel")

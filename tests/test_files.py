"""files.py: files written whole, read without following links, appended by line."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from kernelpick.files import read_regular, replace_whole


def test_a_file_is_replaced_whole_private_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "kept.json"
    target.symlink_to(tmp_path / "elsewhere")  # what the name held is replaced, not followed
    replace_whole(target, "[1, 2]", ".kept-")
    assert not target.is_symlink() and target.read_text() == "[1, 2]"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not (tmp_path / "elsewhere").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["kept.json"]


def test_a_write_that_fails_leaves_no_partial_file(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()  # a file cannot replace a folder
    with pytest.raises(OSError):
        replace_whole(tmp_path / "taken", "text", ".kept-")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


def test_only_a_regular_file_within_the_limit_is_read(tmp_path: Path) -> None:
    (tmp_path / "small").write_bytes(b"12345")
    assert read_regular(tmp_path / "small", 5) == b"12345"
    assert read_regular(tmp_path / "small", 4) is None  # larger than the limit
    os.mkfifo(tmp_path / "pipe")
    assert read_regular(tmp_path / "pipe", 5) is None  # not waited on
    (tmp_path / "link").symlink_to(tmp_path / "small")
    with pytest.raises(OSError) as raised:
        read_regular(tmp_path / "link", 5)
    assert raised.value.errno == errno.ELOOP  # not followed
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "none", 5)

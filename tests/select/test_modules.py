"""Tests of rendered modules: written by content hash, imported by path, loadable by another process."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.errors import TemplateError
from kernelpick.select.modules import keep_kernel_source, load_module, source_hash, write_module

SOURCE = (
    "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef twice(X):\n    pass\n\nVALUE = 42\n"
)


def test_a_module_is_written_once_under_the_cache_by_its_content_hash() -> None:
    path = write_module(SOURCE)
    assert path.parent == settings.cache_dir() / "templates"
    assert path.name == f"{source_hash(SOURCE)[:40]}.py"
    assert path.read_text() == SOURCE
    before = path.stat().st_mtime_ns
    assert write_module(SOURCE) == path
    assert path.stat().st_mtime_ns == before
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".render-")]


def test_a_module_is_imported_by_path_once_per_process() -> None:
    path = write_module(SOURCE)
    module = load_module(path)
    assert module.VALUE == 42
    assert module.twice.__name__ == "twice"  # a real triton.jit kernel, its source found through the file
    assert "def twice" in module.twice.src
    assert load_module(str(path)) is module


def test_another_process_loads_the_rendered_kernel_by_path(tmp_path: Path) -> None:
    path = write_module(SOURCE + "\nVALUE = 43\n")
    script = "import sys; from kernelpick.select import load_module; print(load_module(sys.argv[1]).VALUE)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "43"


def test_a_missing_or_broken_module_is_a_template_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="no rendered kernel module"):
        load_module(tmp_path / "missing.py")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(TemplateError, match="does not import: RuntimeError: boom"):
        load_module(broken)


def test_an_unusable_cache_dir_writes_modules_to_a_temporary_folder_and_keeps_no_source(
    tmp_path: Path,
) -> None:
    file = tmp_path / "cache"
    file.write_text("")
    with settings.override(cache_dir=file):
        path = write_module(SOURCE + "\nVALUE = 44\n")
        assert load_module(path).VALUE == 44
        assert keep_kernel_source(load_module(path).twice) is None  # kept for `kernelpick code` only
    assert not path.is_relative_to(tmp_path)


def test_a_kernel_source_that_cannot_be_written_is_a_warning_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (settings.cache_dir() / "kernels").write_text("a file where the folder goes")
    kernel = load_module(write_module(SOURCE + "\nVALUE = 45\n")).twice
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        assert keep_kernel_source(kernel) is None
        assert keep_kernel_source(kernel) is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert str(settings.cache_dir() / "kernels") in warning and "kernelpick code" in warning

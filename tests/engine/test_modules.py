"""Tests of rendered modules: written by content hash, imported by path, loadable by another process."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.engine.modules import (
    keep_kernel_source,
    kept_file,
    load_module,
    source_hash,
    write_module,
)
from kernelpick.errors import TemplateError

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


# -- nothing in the cache folder runs unless it is what this process rendered (issue 40 item 2) --

PLANTED = "open({marker!r}, 'w').write('ran')\n"


def test_a_module_changed_on_disk_is_written_again_and_the_rendered_source_imported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = SOURCE + "\nVALUE = 46\n"
    path = write_module(source)
    marker = tmp_path / "ran"
    path.write_text(PLANTED.format(marker=str(marker)) + source)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        module = load_module(path)
    assert module.VALUE == 46 and not marker.exists()
    assert path.read_text() == source  # written again
    [warning] = [r.getMessage() for r in caplog.records]
    assert str(path) in warning and "changed since this process wrote it" in warning


def test_another_process_refuses_a_module_whose_content_is_not_its_name_and_renders_it_again(
    tmp_path: Path,
) -> None:
    source = SOURCE + "\nVALUE = 47\n"
    path = write_module(source)
    marker = tmp_path / "ran"
    path.write_text(PLANTED.format(marker=str(marker)) + source)
    by_path = "import sys; from kernelpick.select import load_module; load_module(sys.argv[1])"
    refused = _python(by_path, str(path))
    assert refused.returncode != 0 and "is not the module its name says" in refused.stderr
    rendering = (
        "import sys; from kernelpick.select import load_module, write_module; "
        "print(load_module(write_module(sys.argv[1])).VALUE)"
    )
    assert _python(rendering, source).stdout.strip() == "47"
    assert not marker.exists() and path.read_text() == source


def test_a_planted_pyc_beside_a_module_is_never_run(tmp_path: Path) -> None:
    import py_compile

    source = SOURCE + "\nVALUE = 48\n"
    path = write_module(source)
    planted = tmp_path / "planted.py"
    planted.write_text(SOURCE + "\nVALUE = -1\n")
    cached = importlib.util.cache_from_source(str(path))
    py_compile.compile(str(planted), cfile=cached)
    os.utime(cached, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    assert (
        _python(
            "import sys; from kernelpick.select import load_module; print(load_module(sys.argv[1]).VALUE)",
            str(path),
        ).stdout.strip()
        == "48"
    )


def test_triton_reads_the_checked_source_not_a_file_changed_after_the_check() -> None:
    source = SOURCE + "\nVALUE = 49\n"
    path = write_module(source)
    module = load_module(path)
    path.write_text(source.replace("pass", "1 / 0"))
    assert "pass" in module.twice.src and "1 / 0" not in "".join(inspect.getsourcelines(module.twice.fn)[0])


def test_rendered_modules_and_their_folder_are_private_under_a_permissive_umask(tmp_path: Path) -> None:
    before = os.umask(0o002)
    try:
        with settings.override(cache_dir=tmp_path / "cache"):
            path = write_module(SOURCE + "\nVALUE = 50\n")
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_selector_runs_its_template_in_a_new_process_after_a_line_was_planted_in_its_module(
    tmp_path: Path,
) -> None:
    script = (
        "import sys, torch\n"
        "from kernelpick import Config, Selector, settings, template\n"
        "from tests.select.test_template_choice import SCALE\n"
        "with settings.override(cache_dir=sys.argv[1]):\n"
        "    scale = Selector('scale', [template(SCALE, configs=[Config({'BLOCK': 16})], "
        "constants={'FACTOR': 2.0})])\n"
        "    x = torch.arange(40.0)\n"
        "    assert torch.equal(scale(x), 2 * x)\n"
        "    print(scale.last_selection.from_store)\n"
    )
    cache = tmp_path / "cache"
    assert _python(script, str(cache)).stdout.strip() == "False"  # tuned: the module is rendered
    [module] = (cache / "templates").iterdir()
    marker = tmp_path / "ran"
    module.write_text(PLANTED.format(marker=str(marker)) + module.read_text())
    assert _python(script, str(cache)).stdout.strip() == "True"  # read from the store, and run
    assert not marker.exists()


def _python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -c script args...` in a new process that imports kernelpick and the tests, with this
    test's cache folder."""
    root = str(Path(__file__).parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, *sys.path]),
        "KERNELPICK_CACHE_DIR": str(settings.cache_dir()),
    }
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("name", ["../../outside", "/etc/outside", "abc/def", ""])
def test_a_name_that_is_not_a_hash_names_no_file(name: str) -> None:
    with pytest.raises(ValueError, match="is not a hash"):
        kept_file("templates", name)
    with pytest.raises(ValueError, match="is not a hash"):
        kept_file("kernels", name)

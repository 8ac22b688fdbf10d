"""What crosses to a worker by value: the user's functions and kernels, never a library or a module of theirs."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from kernelpick.workers import values

CHILD = """
import json, sys
from kernelpick.workers import values
kernel, scale, mm = values.decode(sys.stdin.read())
print(json.dumps({
    "kernel": type(kernel).__name__,
    "cache_key": kernel.cache_key,
    "scaled": scale(2.0),
    "mm": mm.__module__,
    "imported_the_test": any(name.startswith("tests") for name in sys.modules),
}))
"""


def test_a_kernel_and_a_closure_cross_by_value_and_the_users_module_is_never_imported() -> None:
    factor = 3.0

    @triton.jit
    def double(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

    data = values.encode((double, lambda x: x * factor, torch.mm))
    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=data.encode(), capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    # The same source and helpers: the worker's launch finds what this process compiled in Triton's cache.
    assert found["kernel"] == "JITFunction" and found["cache_key"] == double.cache_key
    assert found["scaled"] == 6.0
    assert found["mm"] == "torch"  # a library's function goes by name
    assert not found["imported_the_test"]


def test_libraries_are_named_and_the_users_code_is_not() -> None:
    import json as standard

    assert values.is_library(torch) and values.is_library(triton) and values.is_library(standard)
    assert values.is_library(sys.modules["kernelpick.workers.values"])
    assert not values.is_library(sys.modules[__name__])  # a test module: the user's code
    assert not values.is_library(types.ModuleType("__main__"))


def test_a_module_is_looked_at_once_however_many_values_are_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Each value sent asks about every module loaded; a process that compiled templates has hundreds.
    module = types.ModuleType("rendered_here")
    module.__file__ = str(tmp_path / "rendered_here.py")
    monkeypatch.setitem(sys.modules, "rendered_here", module)
    values.encode(lambda x: x + 1)  # asks about every module loaded, this one included
    monkeypatch.setattr(Path, "resolve", lambda self: pytest.fail("resolved a path again"))
    assert not values.is_library(module)
    values.encode(lambda x: x + 2)


def test_an_installed_module_is_a_library_without_resolving_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first tuning of a process meets about a thousand modules: their files are under the folders
    # libraries are installed in, as the import path names them, which says enough.
    installed = types.ModuleType("installed_elsewhere")
    installed.__file__ = str(Path(triton.__file__).parent.parent / "installed_elsewhere" / "__init__.py")
    users = types.ModuleType("users_own")
    users.__file__ = str(Path(__file__).parent / "users_own.py")
    values._library_prefixes()  # the library folders themselves are resolved once, up front
    resolved: list[str] = []
    real_resolve = Path.resolve
    monkeypatch.setattr(Path, "resolve", lambda self: resolved.append(str(self)) or real_resolve(self))
    assert values.is_library(installed) and not resolved
    assert not values.is_library(users) and resolved == [users.__file__]  # elsewhere: looked at closely


def test_rendered_template_modules_are_not_registered_but_their_kernels_cross(tmp_path: Path) -> None:
    # A process that compiled templates holds hundreds of them: each value sent would register them all.
    from kernelpick.engine.modules import load_module

    source = tmp_path / "double.py"
    source.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def double(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)\n"
    )
    module = load_module(source)
    assert module.__name__.startswith(values.RENDERED_PREFIX)
    assert module.__name__ not in values._user_modules()
    kernel = values.decode(values.encode(module.double))
    assert type(kernel).__name__ == "JITFunction" and kernel.cache_key == module.double.cache_key

"""kernelpick's packages only import down: a module imports from its own package or from the packages
below it in `LAYERS`, by every import statement it has (at the top, in a function, under TYPE_CHECKING)."""

from __future__ import annotations

import ast
from pathlib import Path

#: kernelpick's packages and top-level modules, bottom first: each imports only from itself and those
#: before it. `__init__` is kernelpick's own `__init__.py` (the public API, re-exported).
LAYERS = [
    "version",
    "errors",
    "signals",
    "settings",
    "threads",
    "files",
    "device",
    "tensors",
    "calls",
    "config",
    "console",
    "work",
    "codegen",
    "compile",
    "analysis",
    "bench",
    "store",
    "search",
    "workers",
    "engine",
    "select",
    "tune",
    "jobs",
    "ops",
    "pytorch",
    "reports",
    "demo",
    "cli",
    "__init__",
]
SOURCE = Path(__file__).resolve().parents[1] / "src" / "kernelpick"


def layer_of(module: str) -> str:
    """The layer of a module by its dotted name: `kernelpick.store.text` is in `store`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def is_submodule(name: str) -> bool:
    """Whether `from kernelpick import name` imports a module (else a name of kernelpick's `__init__`)."""
    return (SOURCE / f"{name}.py").is_file() or (SOURCE / name / "__init__.py").is_file()


def imported(tree: ast.Module, module: str, package: bool) -> list[tuple[int, str]]:
    """Each kernelpick module that `tree` (the source of `module`, a package's `__init__` when `package`)
    imports, with the line: every import statement, wherever it is."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:  # relative: from the module's own package up
                base = module.split(".") if package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            if target == "kernelpick":
                found += [
                    (node.lineno, f"kernelpick.{alias.name}" if is_submodule(alias.name) else "kernelpick")
                    for alias in node.names
                ]
            else:
                found.append((node.lineno, target))
    return [(line, name) for line, name in found if name == "kernelpick" or name.startswith("kernelpick.")]


def upward(tree: ast.Module, module: str, package: bool = False) -> list[tuple[int, str]]:
    """The imports of `module` (its source parsed as `tree`) that point up `LAYERS` (a layer missing
    from it is the next test's to report)."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    own = rank.get(layer_of(module), len(LAYERS))
    found = imported(tree, module, package)
    return sorted((line, name) for line, name in found if rank.get(layer_of(name), -1) > own)


def modules() -> list[tuple[Path, str]]:
    """Every module of kernelpick's source, with its dotted name."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        found.append((path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)))
    return found


def test_every_import_points_down_the_layers() -> None:
    wrong = [
        f"{path.relative_to(SOURCE.parent)}:{line}: {module} ({layer_of(module)}) imports {name} ({layer_of(name)})"
        for path, module in modules()
        for line, name in upward(ast.parse(path.read_text()), module, path.name == "__init__.py")
    ]
    assert not wrong, "imports that point up the layers (LAYERS, bottom first):\n" + "\n".join(wrong)


def test_every_package_and_module_has_its_place_in_the_layers() -> None:
    found = {path.stem for path in SOURCE.glob("*.py")} | {
        path.name for path in SOURCE.iterdir() if (path / "__init__.py").is_file()
    }
    assert sorted(found) == sorted(LAYERS), "a package or module of kernelpick missing from LAYERS, or gone"


def test_imports_in_functions_and_under_type_checking_count_as_any_other() -> None:
    source = """
from typing import TYPE_CHECKING

from kernelpick import settings
from kernelpick.errors import StoreError

if TYPE_CHECKING:
    from kernelpick.tune.record import TuningRecord


def describe() -> None:
    import kernelpick.select.selector
    from kernelpick import __version__
    from ..reports import data
"""
    found = upward(ast.parse(source), "kernelpick.store.text")
    assert found == [
        (8, "kernelpick.tune.record"),
        (12, "kernelpick.select.selector"),
        (13, "kernelpick"),  # a name of kernelpick's __init__, the top
        (14, "kernelpick.reports"),
    ]


#: The most lines a module of kernelpick has: past it, it holds two ideas (STYLE.md, "Shape").
MAX_MODULE_LINES = 600


def test_every_module_is_under_the_line_limit() -> None:
    long = [
        f"{path.relative_to(SOURCE.parent)}: {lines} lines"
        for path, _ in modules()
        if (lines := len(path.read_text().splitlines())) >= MAX_MODULE_LINES
    ]
    assert not long, f"modules of {MAX_MODULE_LINES} lines or more (split each by idea):\n" + "\n".join(long)

"""Finding a tuned kernel or selector again in another process: by the name a module binds it to."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import sys
import sysconfig
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpick.errors import ConfigError

#: Where another process finds an object: (target, target_args, folder to import from).
Origin = tuple[str, list[Any], str | None]
#: The origin of each object located, by id (the object is held, so its id is not reused); None
#: for one that cannot be found again.
_origins: dict[int, tuple[object, Origin | None]] = {}
_lock = threading.Lock()


def made_by(obj: object, factory: str, *args: Any) -> None:
    """Say how `obj`, which no module binds to a name, is found again in another process: by calling
    `factory` ("package.module:name") with `args` (plain data), as `kernelpick.ops.selector("mm")`."""
    with _lock:
        _origins[id(obj)] = (obj, (factory, list(args), None))


def origin(obj: object) -> Origin | None:
    """Where another process finds `obj` (located once per object)."""
    with _lock:
        known = _origins.get(id(obj))
    if known is not None:
        return known[1]
    found = _locate(obj)
    with _lock:
        _origins.setdefault(id(obj), (obj, found))
        return _origins[id(obj)][1]


def _locate(obj: object) -> Origin | None:
    """The module-level name of `obj`: where its `__module__` and `__qualname__` say, else the first
    module that binds it (a script's `__main__` last: an installed module is found without running
    the script)."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module_name, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        found: Any = sys.modules.get(module_name)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is obj:
            return _named(module_name, qualname)
    main = sys.modules.get("__main__")
    # The main module by its own name (multiprocessing binds it as `__mp_main__` too), and last.
    modules = [
        ("__main__" if module is main else name, module)
        for name, module in list(sys.modules.items())
        if module is not None and (module is not main or name == "__main__")
    ]
    modules.sort(key=lambda item: (item[0] == "__main__", item[0] != module_name))
    for name, module in modules:
        try:
            names = list(vars(module).items())
        except (TypeError, RuntimeError):  # not a module (an object a library put there), or changing
            continue
        bound = next((k for k, v in names if v is obj and not k.startswith("__")), None)
        if bound is not None:
            return _named(name, bound)
    return None


def _named(module_name: str, name: str) -> Origin | None:
    """How another process imports `name` of the module `module_name`: by module name (with the
    folder to import it from, for a module that is the user's own), or a script by its path."""
    module = sys.modules[module_name]
    file = getattr(module, "__file__", None)
    if module_name == "__main__" or module_name.startswith("kernelpick_script_"):
        spec_name = getattr(getattr(module, "__spec__", None), "name", None)
        if spec_name and spec_name != "__main__":  # run as `python -m package.module`
            return f"{spec_name}:{name}", [], None
        if file is None:
            return None  # `python -c`, a notebook: nothing to import
        return f"{Path(file).resolve()}:{name}", [], None
    folder = None
    if file is not None:
        where = Path(file).resolve()
        where = where.parent if where.name == "__init__.py" else where
        folder = str(where.parents[len(module_name.split(".")) - 1])
    return f"{module_name}:{name}", [], None if folder in _installed_folders() else folder


@functools.cache
def _installed_folders() -> set[str]:
    """The folders installed packages and the standard library are imported from."""
    paths = sysconfig.get_paths()
    return {str(Path(paths[kind]).resolve()) for kind in ("purelib", "platlib", "stdlib") if kind in paths}


def resolve(target: str, args: Sequence[Any] = (), folder: str | None = None) -> Any:
    """The object a recording names: `target`'s module imported (a script by its path, under a name
    of its own; a module from `folder` when it is not importable otherwise), its attribute, and
    called with `args` when there are any.

    Raises:
        ConfigError: the module cannot be imported or has no such name.
    """
    where, colon, name = target.rpartition(":")
    if not colon or not where or not name:
        raise ConfigError(f"a recording names {target!r}, not 'package.module:name' or 'file.py:name'")
    try:
        module = _script(Path(where)) if where.endswith(".py") else _module(where, folder)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(
            f"cannot import {where} for {target} ({type(error).__name__}: {error}): tune the recording "
            "where the program that made it can run"
        ) from error
    found: Any = module
    for part in name.split("."):
        found = getattr(found, part, None)
    if found is None:
        raise ConfigError(f"{where} has no {name} (the recording names {target}): was it renamed?")
    return found(*args) if args else found


def _module(name: str, folder: str | None) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        if folder is None or folder in sys.path:
            raise
    sys.path.append(folder)
    return importlib.import_module(name)


@functools.cache
def _script(path: Path) -> Any:
    """A script imported by its path, once, under `kernelpick_script_<stem>`, its folder on the path
    (as when it runs). Its functions are named by that path (`select.choice.qualified_name`), as in
    the script's own process, so that stored results of its selectors' choices match."""
    if not path.is_file():
        raise ConfigError(f"the script {path} that a recording names does not exist")
    name = f"kernelpick_script_{path.stem}"
    if name in sys.modules:
        name = f"{name}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    return import_file(path, name)


def import_file(path: Path, name: str) -> ModuleType:
    """The Python file `path` imported as the module `name`, its folder first on `sys.path` (as when
    Python runs it, so that it imports its neighbours, and so do isolation workers).

    Raises:
        ConfigError: `path` is not a Python file.
    """
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

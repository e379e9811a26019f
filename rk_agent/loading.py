"""Load a Python object named by a string: ``package.module:attr`` or ``path/to/file.py::attr``.

Used wherever a user names their own code on the command line or in YAML (rewards now,
environments later). Main names: `load_object`, `is_import_spec`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from rk_agent.errors import EnvLoadError, LoadError, RewardLoadError, did_you_mean

__all__ = ["is_import_spec", "load_object"]

_LISTED = 20  # names listed when the one asked for is missing


def is_import_spec(spec: str) -> bool:
    """Whether ``spec`` names code (``module:attr`` or ``file.py::attr``) rather than a name."""
    return "::" in spec or ":" in spec


def load_object(spec: str, *, kind: str = "object") -> Any:
    """Import and return the object named by ``spec``.

    Args:
        spec: ``"package.module:attr"`` or ``"path/to/file.py::attr"`` (attr may be dotted).
        kind: what is being loaded, for error messages (``"reward"``, ``"environment"``).

    Raises:
        LoadError: the module or file cannot be imported, or has no such attribute
            (`RewardLoadError` when ``kind`` is ``"reward"``, `EnvLoadError` when it is
            ``"environment"``).

    Example:
        >>> load_object("os.path:join")("a", "b")
        'a/b'
    """
    if "::" in spec:
        path_text, _, attr = spec.partition("::")
        module = _load_file(path_text, spec, kind)
        where = repr(path_text)  # the file as the user named it, not its module's inner name
    elif ":" in spec:
        module_name, _, attr = spec.partition(":")
        module = _load_module(module_name, spec, kind)
        where = f"module {module_name!r}"
    else:
        raise _load_error(kind)(
            f"cannot load {kind} {spec!r}: expected 'package.module:name' or 'file.py::name'."
        )
    if not attr:
        raise _load_error(kind)(f"cannot load {kind} {spec!r}: the name after ':' is empty.")
    obj: Any = module
    for depth, part in enumerate(attr.split(".")):
        if not hasattr(obj, part):
            if depth == 0:
                raise _load_error(kind)(_not_defined(spec, kind, where, part, module))
            public = [n for n in dir(obj) if not n.startswith("_")]
            raise _load_error(kind)(
                f"cannot load {kind} {spec!r}: {'.'.join(attr.split('.')[:depth])!r} has no "
                f"attribute {part!r}.{did_you_mean(part, public)}"
            )
        obj = getattr(obj, part)
    return obj


def _not_defined(spec: str, kind: str, where: str, name: str, module: Any) -> str:
    """The user's file or module has no ``name``: say which names of the kind it does have."""
    offered = _offered(module, kind)
    what = {"reward": "functions", "environment": "classes", "probe": "probes"}.get(kind, "names")
    shown = ", ".join(offered[:_LISTED]) + (
        f" and {len(offered) - _LISTED} more" if len(offered) > _LISTED else ""
    )
    listing = f"It defines these {what}: {shown}." if offered else f"It defines no {what}."
    if kind == "probe" and not offered:
        listing = (
            "It defines no probes: make one with @rk_agent.soundness.probes.probe(name, "
            "description) on a function of the view."
        )
    return (
        f"cannot load {kind} {spec!r}: {where} has no {name!r}.{did_you_mean(name, offered)} "
        f"{listing}"
    )


def _offered(module: Any, kind: str) -> list[str]:
    """The public names a module defines that could be a ``kind``: for an environment its own
    classes; for a reward its own functions and the callable objects it holds (a
    ``RewardFunction(...)``); for a probe the objects that have a probe's ``name``,
    ``variants`` and ``reply``; else everything of its own. Imported names are left out."""
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        own = getattr(obj, "__module__", None) == module.__name__
        if kind == "environment":
            keep = own and inspect.isclass(obj)
        elif kind == "reward":
            plain = inspect.isfunction(obj) or inspect.isbuiltin(obj)
            keep = callable(obj) and not inspect.isclass(obj) and (own or not plain)
        elif kind == "probe":  # a Probe, by its protocol (made in rk_agent.soundness)
            keep = all(hasattr(obj, a) for a in ("name", "variants", "reply"))
        else:
            keep = own
        if keep:
            names.append(name)
    return sorted(names)


def _load_error(kind: str) -> type[LoadError]:
    """The error class for loading a ``kind``."""
    return {"reward": RewardLoadError, "environment": EnvLoadError}.get(kind, LoadError)


def _load_module(module_name: str, spec: str, kind: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise _load_error(kind)(
            f"cannot load {kind} {spec!r}: importing {module_name!r} failed: {exc}. Is the "
            "package installed, or did you mean a file ('path/to/file.py::name')?"
        ) from exc


def _load_file(path_text: str, spec: str, kind: str) -> Any:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise _load_error(kind)(
            f"cannot load {kind} {spec!r}: file {path_text!r} does not exist "
            f"(looked in {Path.cwd()})."
        )
    resolved = path.resolve()
    # A stable, unique module name per file, so the same file loads once and pickles by name.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    module_name = f"rk_agent_user.{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise _load_error(kind)(f"cannot load {kind} {spec!r}: {path_text!r} is not a Python file.")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    # Let the file import its neighbours, as it would when run as a script.
    parent = str(resolved.parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)
    _forget_other_neighbours(resolved.parent)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise _load_error(kind)(
            f"cannot load {kind} {spec!r}: running {path_text!r} failed with "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    finally:
        if added:
            sys.path.remove(parent)
    return module


def _forget_other_neighbours(folder: Path) -> None:
    """Drop from ``sys.modules`` the top-level modules named like a neighbour of the file about
    to run (``helpers.py``, ``utils/``) but imported from another user folder: two reward files
    loaded in one process, each beside its own ``helpers.py``, each get their own (the second
    had been handed the first's, whose names it may not have). The standard library and
    installed packages are never dropped."""
    installed = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        name = entry.stem if entry.suffix == ".py" else entry.name
        module = sys.modules.get(name)
        if module is None or name in sys.stdlib_module_names:
            continue
        origin = getattr(module, "__file__", None)
        if origin is None or getattr(module.__spec__, "_initializing", False):
            continue  # a namespace package, a built-in, or being imported (a caller of ours)
        source = Path(origin).resolve()
        if any(root in source.parents for root in installed):
            continue
        home = source.parent.parent if source.name == "__init__.py" else source.parent
        if home != folder:
            del sys.modules[name]

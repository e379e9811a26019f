"""Public names listed once, loaded on first use: a package's ``__init__.pyi`` is the list.

A package that re-exports names keeps them in one place, its stub ``__init__.pyi``
(``from rk_agent.types import EvaluateResult as EvaluateResult`` per name, the explicit
re-export form type checkers read). Its ``__init__.py`` calls `attach_stub`, which reads the
stub's imports and returns the PEP 562 ``__getattr__``, ``__dir__`` and ``__all__`` that import
each name from its module the first time it is used. This is the Scientific Python ecosystem's
SPEC 1 (lazy loading) pattern: ``import rk_agent`` stays fast, and adding a public name is one
line in the stub.

Main names: `attach_stub`.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["attach_stub"]


def attach_stub(
    package: str, init_file: str, *, extra: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__, __dir__, __all__`` for ``package`` from the stub beside ``init_file``.

    Args:
        package: the package's ``__name__``.
        init_file: its ``__file__`` (the stub is the same path with ``.pyi``).
        extra: names the ``__init__.py`` defines itself (``__version__``), added to ``__all__``.

    Example:
        In ``rk_agent/__init__.py``::

            __getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
    """
    exports = _stub_exports(Path(init_file).with_suffix(".pyi"))
    namespace = importlib.import_module(package).__dict__
    # A name that is also a submodule's (``rk_agent.envs.tool``, the decorator ``tool``) is set
    # now: importing the submodule later would otherwise leave the module under that name.
    folder = Path(init_file).parent
    for name, module in exports.items():
        if (folder / f"{name}.py").exists() or (folder / name / "__init__.py").exists():
            namespace[name] = getattr(importlib.import_module(module), name)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    names = sorted({*exports, *extra})

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)


def _stub_exports(stub: Path) -> dict[str, str]:
    """``{name: module}`` of every ``from module import name as name`` in the stub."""
    exports: dict[str, str] = {}
    for node in ast.parse(stub.read_text("utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                exports[alias.asname or alias.name] = node.module
    return exports

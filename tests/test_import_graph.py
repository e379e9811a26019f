"""The package's import graph has no circles: a new one fails here, naming its modules.

Every import counts, also those inside functions (they run as surely as top-level ones, only
later); imports under ``if TYPE_CHECKING:`` do not (they never run). An import of a name from a
package counts as an arrow to the submodule when the name is one. Between subpackages
(``rk_agent.rewards``, ``rk_agent.fireworks``, ...), a ``"rk_agent.x.y:attr"`` string counts as
an arrow too: it is loaded later, but it is a dependency all the same (an upper package plugs
in through entry points instead).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import rk_agent

ROOT = Path(rk_agent.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                hidden.update(id(n) for n in ast.walk(inner))
    return hidden


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    hidden = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circles() -> None:
    found = circles(import_graph())
    assert found == [], "import circles (break each with a lower module or a hook):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


_SPEC = re.compile(r"^(rk_agent(?:\.\w+)+):[\w.]+$")


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """Subpackage to subpackage: imports, and modules named in ``"module:attr"`` strings."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, targets in import_graph().items():
        graph.setdefault(_package(name), set()).update(_package(t) for t in targets)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                spec = _SPEC.match(node.value)
                if spec and spec.group(1) in modules:
                    graph[_package(name)].add(_package(spec.group(1)))
    return {package: targets - {package} for package, targets in graph.items()}


def test_subpackages_have_no_circles_strings_included() -> None:
    found = circles(package_graph())
    assert found == [], "circles between subpackages (imports or 'module:attr' strings):\n" + (
        "\n".join(" <-> ".join(c) for c in found)
    )


def test_the_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_are_read_from_functions_but_not_from_type_checking_blocks(
    tmp_path: Path,
) -> None:
    modules = {"rk_agent.x": tmp_path / "x.py", "rk_agent.y": tmp_path / "y.py"}
    source = tmp_path / "z.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from rk_agent.y import Y\n"
        "def f():\n    from rk_agent.x import X\n"
    )
    assert _imports("rk_agent.z", source, modules) == {"rk_agent.x"}

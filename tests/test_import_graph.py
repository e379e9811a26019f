"""The package's import graph has no circles: a new one fails here, naming its modules.

Every import counts, also those inside functions (they run as surely as top-level ones, only
later), and so do the names a package's ``__init__.pyi`` lists (they load on first use); imports
under ``if TYPE_CHECKING:`` do not (they never run). An import of a name from a
package counts as an arrow to the submodule when the name is one. Between subpackages
(``rk_agent.rewards``, ``rk_agent.fireworks``, ...), a ``"rk_agent.x.y:attr"`` string counts as
an arrow too: it is loaded later, but it is a dependency all the same (an upper package plugs
in through entry points instead).

Between subpackages and the top-level modules the arrows also point one way, down `LAYERS`
(the top-level modules in an order of their own, then envs -> policies -> runs -> rollouts ->
trainers, the way data flows), and nothing imports `rk_agent.testing`, the test doubles,
which may import anything.
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
    """Module to module. A package's ``__init__.pyi`` counts as its ``__init__.py``'s imports:
    `rk_agent._lazy.attach_stub` imports each listed name's module when it is first used (only
    later, as an import inside a function does). `rk_agent`'s own stub reaches every package
    by design (`ROOT_STUB`) and is left out."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    for stub in ROOT.rglob("__init__.pyi"):
        if stub != ROOT_STUB:
            name = _module_name(stub)
            graph[name] |= {m for m in _stub_imports(stub) if m in modules and m != name}
    return graph


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


LAYERS: list[set[str]] = [
    # The top-level modules every package shares, in four layers of their own. First what
    # stands alone: the lazy loader, the error tree, text and files, threads, processes, GC,
    # the loop bridge, the HTTP/1.1 pool, trusted JSON.
    {"rk_agent._lazy", "rk_agent.errors", "rk_agent.secrets", "rk_agent.terminal_text",
     "rk_agent.atomic_file", "rk_agent.daemon_threads", "rk_agent.gc_tuning",
     "rk_agent.processes", "rk_agent.loop_thread", "rk_agent.http1", "rk_agent.trusted_json"},
    # What builds on the error tree: `rk_agent` itself (its ``__init__.py``: the version and
    # the lazy loader), the wire types, binding, config files, JSONL, loading user code, retries.
    {"rk_agent", "rk_agent.types", "rk_agent.binding", "rk_agent.config_files",
     "rk_agent.jsonl", "rk_agent.loading", "rk_agent.retry"},
    # Registries of user code (loading), an endpoint's errors (retries).
    {"rk_agent.registry", "rk_agent.endpoint_errors"},
    # The model client: a transport over all of the above.
    {"rk_agent.model_client"},
    {"rk_agent.tool_calls", "rk_agent.sandbox"},
    {"rk_agent.rewards"},
    {"rk_agent.envs"},
    {"rk_agent.mcp"},
    # Environments from elsewhere (one module per outside source); envs reach them by entry
    # points only (`rk_agent.env_sources`).
    {"rk_agent.interop"},
    {"rk_agent.policies"},
    {"rk_agent.runs"},
    {"rk_agent.rollouts"},
    {"rk_agent.soundness", "rk_agent.trainers", "rk_agent.server", "rk_agent.fireworks"},
    {"rk_agent.view", "rk_agent.selfhost", "rk_agent.evaluation"},
    {"rk_agent.cli"},
    {"rk_agent.__main__"},
]  # fmt: skip
"""The packages from the bottom up: each imports only from lower layers (the first: its own)."""

TESTING = "rk_agent.testing"
"""The test doubles: they may import any package; no package imports them."""

ROOT_STUB = ROOT / "__init__.pyi"
"""The one exception: `rk_agent` re-exports `StubServer` and `ScriptedPolicy` from `TESTING`,
lazily (PEP 562), so ``from rk_agent import StubServer`` works; nothing loads them until then."""


def upward_arrows(graph: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """Every arrow to the same or a higher layer, and every package that no layer lists."""
    layer_of = {package: i for i, layer in enumerate(layers) for package in layer}
    found = [f"{package} is in no layer" for package in sorted(graph) if package not in layer_of]
    for package, targets in sorted(graph.items()):
        for target in sorted(targets):
            if package in layer_of and target in layer_of:
                low, high = layer_of[target], layer_of[package]
                if low >= high:
                    found.append(f"{package} -> {target}")
    return found


def test_arrows_between_subpackages_point_down_the_layers() -> None:
    graph = {p: t - {TESTING} for p, t in package_graph().items() if p != TESTING}
    found = upward_arrows(graph, LAYERS)
    assert found == [], "arrows up the layers (move the code down, or hook it in):\n" + (
        "\n".join(found)
    )


def _stub_imports(stub: Path) -> set[str]:
    return {
        node.module
        for node in ast.parse(stub.read_text("utf-8")).body
        if isinstance(node, ast.ImportFrom) and node.module
    }


def test_nothing_imports_the_test_doubles() -> None:
    users = sorted(p for p, targets in package_graph().items() if TESTING in targets)
    users += sorted(
        _module_name(stub)
        for stub in ROOT.rglob("*.pyi")
        if stub != ROOT_STUB
        and not _module_name(stub).startswith(TESTING)
        and any(m == TESTING or m.startswith(f"{TESTING}.") for m in _stub_imports(stub))
    )
    assert users == [], f"{TESTING} is for tests; these import it: {users}"


def test_only_the_doubles_come_from_testing_at_the_top() -> None:
    doubles = {m for m in _stub_imports(ROOT_STUB) if m.startswith(f"{TESTING}.")}
    assert doubles == {f"{TESTING}.scripted_policy", f"{TESTING}.stub_server"}


def test_the_layer_check_finds_an_upward_arrow() -> None:
    layers = [{"a", "b"}, {"c"}, {"d", "e"}]
    graph = {"a": {"b"}, "c": {"a"}, "d": {"c", "e"}, "e": set(), "f": set()}
    # An arrow within a layer is one too, in the first as in any other.
    assert upward_arrows(graph, layers) == ["f is in no layer", "a -> b", "d -> e"]
    assert upward_arrows({"c": {"d"}}, layers) == ["c -> d"]

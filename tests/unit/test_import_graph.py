"""The packages depend on each other one way: no import cycles, at module level or deferred."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("graph", "tools")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and "TYPE_CHECKING" in ast.unparse(
        node.test
    )


def _imports(tree: ast.AST, modules: set[str]) -> set[str]:
    """The project modules a module imports at run time, wherever the import statement is."""
    found: set[str] = set()
    skipped = {id(n) for n in ast.walk(tree) if isinstance(n, ast.If) and _is_type_checking(n)}
    stack = [tree]
    while stack:
        node = stack.pop()
        if id(node) in skipped:
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports."""
    paths = [p for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(ast.parse(p.read_text()), modules) for p in paths}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in edges.get(node, ()):
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycles() -> None:
    # (That tools/ imports nothing from graph/ is tested in test_tools_are_independent.py.)
    assert _cycles(import_graph()) == []


def _package(module: str, packages: set[str]) -> str:
    return module if module in packages else module.rpartition(".")[0]


def package_edges() -> dict[str, set[str]]:
    """Package of `graph` → those its modules import (its top-level modules are package `graph`;
    a package's sub-packages are part of it: how storage cuts itself up is its own affair)."""
    modules = import_graph()
    packages = {m for m in modules if (REPO / m.replace(".", "/") / "__init__.py").exists()}

    def package(module: str) -> str:
        return ".".join(_package(module, packages).split(".")[:2])

    edges: dict[str, set[str]] = {}
    for module, targets in modules.items():
        source = package(module)
        edges.setdefault(source, set()).update(package(t) for t in targets if package(t) != source)
    return edges


def test_the_packages_stack() -> None:
    """No package-level cycle: the kernel (graph.core) at the bottom; models, policy, storage,
    threads and tracing beside each other above it; the loop (graph's top level) above those;
    the runs and the front ends (cli, server, temporal) on top."""
    assert _cycles(package_edges()) == []


def test_the_kernel_imports_nothing_of_the_agent() -> None:
    assert {t for t in package_edges()["graph.core"] if t.startswith("graph")} == set()


STORAGE = "graph.storage"
STORAGE_BASE = {
    f"{STORAGE}.{part}"
    for part in ("errors", "internals", "ferry_store", "codec", "history", "threads")
}
"""What every back end shares: it imports no back end, nor the opening path."""
STORAGE_BACK_ENDS = {f"{STORAGE}.{part}" for part in ("sqlite", "postgres", "leases")}
STORAGE_OPENING = {STORAGE, f"{STORAGE}.stores"}
"""Where savers and stores are opened from the settings: nothing in storage imports it."""


def storage_edges() -> dict[str, set[str]]:
    """Part of `graph.storage` → the parts its modules import.

    A part is a sub-package (`graph.storage.sqlite`), a module at storage's top level
    (`graph.storage.errors`), or the package's `__init__` itself (`graph.storage`).
    """

    def part(module: str) -> str | None:
        if module == STORAGE:
            return STORAGE
        if not module.startswith(f"{STORAGE}."):
            return None
        return ".".join(module.split(".")[:3])

    edges: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if (source := part(module)) is None:
            continue
        found = {p for t in targets if (p := part(t)) is not None and p != source}
        edges.setdefault(source, set()).update(found)
    return edges


def test_storage_parts_stack() -> None:
    """No cycle among storage's parts: the shared base (errors, internals, the FerryStore
    protocol, the codec, the history and thread helpers) at the bottom, the back ends (sqlite,
    postgres, leases) above it, the opening path (`graph.storage`, its stores) on top."""
    edges = storage_edges()
    assert set(edges) >= STORAGE_BASE | STORAGE_BACK_ENDS | STORAGE_OPENING
    assert _cycles(edges) == []
    upward = {
        source: sorted(edges[source] & above)
        for layer, above in (
            (STORAGE_BASE, STORAGE_BACK_ENDS | STORAGE_OPENING),
            (STORAGE_BACK_ENDS, STORAGE_OPENING),
        )
        for source in layer
        if edges[source] & above
    }
    assert upward == {}


def test_the_check_finds_a_cycle_when_there_is_one() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert sorted(_cycles(edges)) == [["a", "b", "c"], ["d"]]


# What storage still takes from outside it, by module, and why: `ConfigError`, the one error
# type the CLI reports as a setting to fix (DatabaseError and a bad Postgres URL or encryption
# key are ones); the settings object the factories are handed (`graph.storage`) and that
# `serializer()` reads when a saver is made without one (FERRY_MAX_STORED_VALUE_MB); and
# `graph.core.log.redact`, which keeps secrets out of a refused value's message. The reducer, node
# and channel names come in as parameters or are spelled out (and checked against the graph).
_STORAGE_STILL_IMPORTS = {
    "graph.storage": {"graph.core.settings"},
    "graph.storage.errors": {"graph.core.settings"},
    "graph.storage.postgres.saver": {"graph.core.settings"},
    "graph.storage.codec.serde": {"graph.core.settings", "graph.core.log"},
}


def _agent_imports(tree: ast.AST) -> set[str]:
    """The `graph.*` modules outside `graph.storage` a module imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found |= {
            name
            for name in names
            if (name == "graph" or name.startswith("graph."))
            and not (name == "graph.storage" or name.startswith("graph.storage."))
        }
    return found


def test_storage_imports_nothing_of_the_agent() -> None:
    storage = REPO / "graph" / "storage"
    imported = {
        _module_name(path): found
        for path in storage.rglob("*.py")
        if (found := _agent_imports(ast.parse(path.read_text())))
    }
    extra = {
        module: sorted(found - _STORAGE_STILL_IMPORTS.get(module, set()))
        for module, found in imported.items()
        if found - _STORAGE_STILL_IMPORTS.get(module, set())
    }
    assert extra == {}, (
        "graph/storage imports the agent: pass what it needs (the reducer, settings) as "
        f"parameters instead: {extra}"
    )


def test_the_agent_import_check_sees_deferred_and_type_checking_imports() -> None:
    source = (
        "from graph.storage import x\nif TYPE_CHECKING:\n    from graph.core.settings import S\n"
        "def f():\n    import graph.state\n"
    )
    assert _agent_imports(ast.parse(source)) == {"graph.core.settings", "graph.state"}


MAX_TOP_LEVEL_MODULES = 14


def test_graph_keeps_at_most_14_modules_at_its_top_level() -> None:
    modules = sorted(p.name for p in (REPO / "graph").glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, (
        f"graph/ has {len(modules)} modules at its top level (at most "
        f"{MAX_TOP_LEVEL_MODULES}): move some into a package by concern: {modules}"
    )


MAX_SQLITE_SAVER_MODULES = 15
_MODULES_IMPORTED = (
    "import sys; before = set(sys.modules); import {module}; "
    "print('\\n'.join(sorted(m for m in sys.modules if m not in before "
    "and m.split('.')[0] in ('graph', 'tools'))))"
)


def test_importing_the_sqlite_saver_loads_at_most_15_project_modules() -> None:
    """The SQLite saver reads in one sitting: a reader following its imports opens few modules.

    In a new process, so that what other tests imported does not count; packages count too.
    """
    source = _MODULES_IMPORTED.format(module="graph.storage.sqlite.saver")
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=True, cwd=REPO
    )
    loaded = done.stdout.split()
    assert "graph.storage.sqlite.saver" in loaded
    assert len(loaded) <= MAX_SQLITE_SAVER_MODULES, (
        f"importing the SQLite saver loads {len(loaded)} project modules (at most "
        f"{MAX_SQLITE_SAVER_MODULES}): {loaded}"
    )

"""Rules that keep the source tree readable: no module past 700 lines, no import cycle.

Why: a newcomer reads one module for one concern, and a cycle means two modules that can only
be understood (and imported, and tested) together. Every import counts: lazy ones inside
functions, since they tie the modules as much at run time, and those under
``if TYPE_CHECKING:``, since a module whose types name another's cannot be read without it (a
module that needs a type of one that imports it declares a Protocol of what it reads, or the
type moves to a module both can import). ``PENDING_LINES`` and ``PENDING_CYCLES`` list what
breaks a rule today, a module with the most lines it may reach, so that nothing grows while it
waits; an entry that no longer breaks its rule must be removed (a test says so).
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src"
MAX_LINES = 700
# declarations of every setting, one after the other (their values' types and parsers are
# values.py's and listening.py's): long by nature, not by mixing concerns
EXEMPT = {"corral/config/settings.py"}
# modules over MAX_LINES today, with their present size as a ceiling
PENDING_LINES: dict[str, int] = {}
# import cycles today (lazy and type-only imports included)
PENDING_CYCLES: set[frozenset[str]] = set()


def sources() -> list[Path]:
    return sorted(p for p in (SOURCE / "corral").rglob("*") if p.suffix in (".py", ".pyx"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_longer_than_the_limit() -> None:
    too_long = []
    # and Cython's definition files: one may hold inline functions (http/_fieldgrammar.pxd)
    definitions = sorted(p for p in (SOURCE / "corral").rglob("*") if p.suffix in (".pxd", ".pxi"))
    for path in sources() + definitions:
        rel = path.relative_to(SOURCE).as_posix()
        if rel in EXEMPT:
            continue
        limit = PENDING_LINES.get(rel, MAX_LINES)
        if line_count(path) > limit:
            too_long.append(f"{rel}: {line_count(path)} lines (at most {limit})")
    assert not too_long, "split these modules by concern:\n" + "\n".join(too_long)


def test_every_pending_module_is_still_too_long() -> None:
    fixed = [rel for rel in PENDING_LINES if line_count(SOURCE / rel) <= MAX_LINES]
    assert not fixed, f"remove from PENDING_LINES (now within {MAX_LINES} lines): {fixed}"


def imported(path: Path, name: str, modules: set[str]) -> set[str]:
    """The corral modules ``path`` imports, at any depth of its code (``if TYPE_CHECKING:``
    blocks included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return {target for target in found if target in modules and target != name}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in sources() if path.suffix == ".py"}
    names = set(paths)
    return {name: imported(path, name, names) for name, path in paths.items()}


def test_there_is_no_import_cycle() -> None:
    new = [cycle for cycle in cycles(import_graph()) if cycle not in PENDING_CYCLES]
    assert not new, "import cycles (lazy and type-only imports count):\n" + "\n".join(
        " <-> ".join(sorted(cycle)) for cycle in new
    )


def test_every_pending_cycle_is_still_a_cycle() -> None:
    gone = PENDING_CYCLES - set(cycles(import_graph()))
    assert not gone, f"remove from PENDING_CYCLES (no longer cycles): {gone}"


def test_the_cycle_finder_finds_a_cycle_and_the_graph_sees_lazy_and_type_only_imports() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    graph = import_graph()
    # a lazy import (in AsgiAdapter._websocket) is an edge, and so is one under TYPE_CHECKING
    # (deadline.py's AsgiCycle, handover.py's Fork)
    assert "corral.apps.asgi.websocket_session" in graph["corral.apps.asgi.adapter"]
    assert "corral.apps.asgi.runner" in graph["corral.apps.asgi.deadline"]
    assert "corral.master.fork" in graph["corral.interpreter.handover"]

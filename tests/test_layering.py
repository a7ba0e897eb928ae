"""The package's import graph: layers point one way, and there are no cycles.

Imports inside functions and under ``TYPE_CHECKING`` are left out: they do not run at import
time (the lazy ones are how ``%load_ext`` stays light), so they cannot form a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pi_notebook"

# a module may import at load time only from its own layer and the layers listed
ALLOWED = {
    "ai": {"ai"},
    "agent": {"agent", "ai"},
    "session": {"session", "agent", "ai", "tools.updates", "tools.redact", "widgets.markdown"},
    "tools": {"tools", "agent", "ai"},
    "widgets": {"widgets", "ai", "agent", "tools.updates", "tools.approval"},
    "mcp": {"mcp", "tools", "agent", "ai"},
    "magics": {"magics", "widgets", "tools", "session", "mcp", "agent", "ai"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level_imports(path: Path) -> set[str]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and _is_type_checking(node):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("pi_notebook"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.startswith("pi_notebook"):
                    found.add(target)
                    for alias in node.names:  # `from . import x` may name a submodule
                        candidate = f"{target}.{alias.name}"
                        if _exists(candidate):
                            found.add(candidate)

    visit(ast.parse(path.read_text()).body)
    found.discard(module)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _top_level_imports(p) for p in PACKAGE.rglob("*.py")}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _allowed(source_layer: str, target: str) -> bool:
    rest = target.split(".", 1)[1] if "." in target else ""
    return any(rest == a or rest.startswith(a + ".") for a in ALLOWED[source_layer])


def test_layers_point_one_way():
    wrong = []
    for module, imports in _graph().items():
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        wrong += [f"{module} -> {t}" for t in sorted(imports)
                  if _layer(t) in ALLOWED and not _allowed(layer, t)]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_only_http_module_imports_httpx():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "httpx" or n.startswith("httpx.") for n in names):
                offenders.append(str(path.relative_to(PACKAGE)))
    assert sorted(set(offenders)) == ["ai/_http.py"]

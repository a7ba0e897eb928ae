"""The package's import graph: layers point one way, and there are no cycles.

Every import counts, also those inside functions (the lazy ones are how ``%load_ext`` stays
light) and under ``TYPE_CHECKING``: they cannot break the import at run time, but a circle
through them is still two modules that each need the other, which is what this test is for.
``from . import worker`` names the submodule, not its package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pi_notebook"

# a module may import at load time only from its own layer and the layers listed
ALLOWED = {
    "ai": {"ai"},
    "agent": {"agent", "ai"},
    "session": {"session", "agent", "ai", "tools.output.updates", "tools.trust.redact", "widgets.markdown"},
    "review": {"review"},
    "tools": {"tools", "agent", "ai", "review"},
    # the tools modules the views share with the tools: the typed updates, the approval types,
    # the policy vocabulary and the traceback rules (so the model and the view fold alike)
    "widgets": {"widgets", "ai", "agent", "tools.output.updates", "tools.trust.approval",
                "tools.trust.policy", "tools.output.tracebacks"},
    # the embedded small model: its provider registers with ai/ (models.register_model_factory,
    # stream.add_provider_extension), so ai/ never imports it; its run checks read agent types;
    # its intent reader takes the variables the namespace summary listed (tools/context/namespace.py);
    # its figure check reads a call's display records (tools/output/updates.py, as the views do)
    "local": {"local", "agent", "ai", "tools.context.namespace", "tools.output.updates"},
    # the MCP logs live in the project's one cache folder (local/setup.py's cache_dir)
    "mcp": {"mcp", "tools", "agent", "ai", "local.setup"},
    # the kernel served over MCP: the notebook tools behind the SDK's server
    "serve": {"serve", "tools", "agent", "ai"},
    "magics": {"magics", "widgets", "tools", "session", "mcp", "serve", "local", "agent", "ai", "review"},
}

# an old ``python -m`` command name kept working: a script that runs the new module's command,
# never imported (test_command_shims_are_not_imported), so it stands outside the floors
COMMAND_SHIMS = {"pi_notebook.ai.providers.local_setup"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every pi_notebook module ``path`` imports, wherever the import statement is."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pi_notebook"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("pi_notebook"):
                continue
            submodules = {f"{target}.{a.name}" for a in node.names if _exists(f"{target}.{a.name}")}
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names are the package's own
                found.add(target)
    found.discard(module)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py") if _module_name(p) not in COMMAND_SHIMS}


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


# the rooms of tools/, from the ground up: a room imports only from itself and the rooms before it
TOOLS_ROOMS = ("trust", "output", "kernel", "context", "python")


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "tools" else None


def test_tools_rooms_point_one_way():
    wrong = []
    for module, imports in _graph().items():
        room = _room(module)
        if room is None:
            continue
        below = TOOLS_ROOMS[: TOOLS_ROOMS.index(room) + 1]
        wrong += [f"{module} -> {t}" for t in sorted(imports) if _layer(t) == "tools" and _room(t) not in below]
    assert not wrong, "imports against the rooms of tools/:\n" + "\n".join(wrong)


def test_every_tools_module_is_in_a_room():
    loose = [p.name for p in (PACKAGE / "tools").glob("*.py") if p.name != "__init__.py"]
    rooms = {p.name for p in (PACKAGE / "tools").iterdir() if (p / "__init__.py").is_file()}
    assert not loose and rooms == set(TOOLS_ROOMS), (loose, rooms)


def test_command_shims_are_not_imported():
    importers = [m for m, imports in _graph().items() if imports & COMMAND_SHIMS]
    assert not importers
    assert all(_exists(shim) for shim in COMMAND_SHIMS)


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


def test_image_mimes_are_defined_once():
    # the views, the transcript and the model's content read one tuple (tools/output/updates.py)
    import re

    defining = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                      if re.search(r"^_?IMAGE_MIMES\b.*=", p.read_text(), re.M))
    assert defining == ["tools/output/updates.py"]

"""docs/design/README.md is the map a new colleague reads first: every module has a row.

A row names modules in backticks inside its layer's section (``## `tools/`: ...``): a file
(`history.py`), a pattern (`providers/local*.py`) or a folder (`providers/openai_completions/`).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pi_notebook"
MAP = ROOT / "docs" / "design" / "README.md"


def _sections() -> dict[str, list[str]]:
    """Layer folder ('' for the package root) -> the backticked names in its section."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in MAP.read_text().splitlines():
        heading = re.match(r"^## `([a-z_]*/?)`", line)
        if heading:
            current = heading.group(1).rstrip("/")
            current = "" if current == "pi_notebook" else current
            sections[current] = []
        elif current is not None and line.startswith("|"):
            first_cell = line.split("|")[1]
            sections[current] += re.findall(r"`([^`]+)`", first_cell)
    return sections


def _covered(relative: str, names: list[str]) -> bool:
    for name in names:
        if name.endswith("/") and relative.startswith(name):
            return True
        if fnmatch.fnmatch(relative, name):
            return True
    return False


def test_every_module_has_a_row_in_the_map():
    sections = _sections()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        layer = relative.parts[0] if len(relative.parts) > 1 else ""
        inner = "/".join(relative.parts[1:]) if layer else relative.name
        if layer and relative.name == "__init__.py":
            continue  # a package's __init__ re-exports or names its folder; its rows are its row
        if not _covered(inner, sections.get(layer, [])):
            missing.append(str(relative))
    assert not missing, f"modules without a row in docs/design/README.md: {missing}"


def test_the_map_names_no_module_that_does_not_exist():
    stale = []
    for layer, names in _sections().items():
        base = PACKAGE / layer if layer else PACKAGE
        for name in names:
            if not name.endswith((".py", "/")) or "*" in name:
                continue
            target = base / name
            if not target.exists():
                stale.append(f"{layer}/{name}" if layer else name)
    assert not stale, f"the map names modules that are gone: {stale}"


# --- every other map of modules in docs/ ----------------------------------------------------
# A table whose first header cell is "module" is a map. Under a heading that names a folder
# (``## magics/``, ``## Modules (`pi_notebook/mcp/`, ...)``, ``### `openai_completions/` `` inside
# the section of its parent folder) it is that folder's map: every module of the folder is named
# in one of the page's maps; a heading that names none is in its parent heading's folder. Every
# name a map gives, with or without a folder, exists.

DOCS = ROOT / "docs"
_FOLDER = re.compile(r"`?((?:pi_notebook/)?[a-z_]+(?:/[a-z_]+)*/)`?")


def _folder_of(heading: str, parent: Path | None) -> Path | None:
    match = _FOLDER.search(heading)
    if not match:
        return None
    name = match.group(1).removeprefix("pi_notebook/")
    for base in (PACKAGE, parent):
        if base is not None and (base / name).is_dir():
            return base / name
    return None


def _doc_maps(page: Path) -> list[tuple[Path | None, list[str]]]:
    """(folder or None, backticked names of the first column) for each map on the page."""
    maps: list[tuple[Path | None, list[str]]] = []
    folder: Path | None = None
    levels: dict[int, Path | None] = {}
    in_table = False
    for line in page.read_text().splitlines():
        heading = re.match(r"^(#+)\s+(.*)", line)
        if heading:
            level = len(heading.group(1))
            parent = next((levels[k] for k in sorted(levels, reverse=True) if k < level and levels[k]), None)
            # a heading without a folder belongs to the folder of its parent heading
            folder = _folder_of(heading.group(2), parent) or parent
            levels = {k: v for k, v in levels.items() if k < level}
            levels[level] = folder
            in_table = False
            continue
        cells = line.split("|")
        if line.startswith("|") and cells[1].strip().lower() == "module":
            maps.append((folder, []))
            in_table = True
        elif in_table and line.startswith("|"):
            maps[-1][1].extend(re.findall(r"`([^`]+)`", cells[1]))
        else:
            in_table = False
    return maps


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if p != MAP)


def _named(base: Path, name: str) -> list[Path]:
    if "*" in name:
        return sorted(base.glob(name))
    target = base / name
    return [target] if target.exists() else []


def _is_module_name(name: str) -> bool:
    return name.endswith((".py", "/")) and " " not in name


def test_every_page_with_a_map_is_found():
    found = {p.name for p in _pages() if _doc_maps(p)}
    assert {"notebook-layer.md", "ai-core.md", "mcp.md", "notebook-context.md"} <= found, found


def test_every_map_names_only_modules_that_exist():
    stale = []
    for page in _pages():
        for folder, names in _doc_maps(page):
            for name in filter(_is_module_name, names):
                bases = [folder] if folder else [PACKAGE]
                if not any(_named(base, name) for base in bases):
                    stale.append(f"{page.name}: {name}")
    assert not stale, f"maps in docs/ name modules that are gone: {stale}"


def test_a_folder_map_names_every_module_of_its_folder():
    missing = []
    for page in _pages():
        maps = _doc_maps(page)
        for folder, _ in maps:
            if folder is None:
                continue
            # a module named in any map of the page counts (ai-core.md lists agent/types.py
            # with the data model, not under agent/)
            covered = {t.resolve() for f, names in maps for name in filter(_is_module_name, names)
                       for base in ([f] if f else [PACKAGE]) for t in _named(base, name)}
            for module in sorted(folder.rglob("*.py")):
                if module.name == "__init__.py" and module.parent == folder:
                    continue  # a folder's __init__ re-exports; its section is its row
                if not any(module.resolve() == c or c in module.resolve().parents for c in covered):
                    missing.append(f"{page.name}: {module.relative_to(PACKAGE)}")
    assert not missing, f"folder maps in docs/ miss modules: {missing}"

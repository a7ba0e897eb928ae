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
        if layer and inner == "__init__.py":
            continue  # a layer's __init__ re-exports; its section is its row
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

"""Files a prompt names: does each exist, relative to the kernel, and what does it start with.

"load notebooks/data/sales.csv into df": a small model shortens the path it was given
(measured on the 0.5B: ``data/sales.csv``, ``sales.csv``) and then cannot tell why the file
is missing. One line per named file, with the path exactly as it opens from the kernel's
working directory and, for a text file, its first line (a CSV's header), keeps the path
and the columns in front of the model at a few tokens' cost. Only paths with a known data
extension are looked at; nothing is read past the first line; a first line is read only of a
regular file inside the kernel's project tree, through tools/context/project_files.py (which redacts).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..output.format import cut
from .project_files import ProjectFileError, project_root, read_project_file

__all__ = ["file_notes", "named_paths"]

_EXTENSIONS = ("csv", "tsv", "txt", "json", "jsonl", "parquet", "feather", "xlsx", "xls", "pkl", "pickle",
               "npy", "npz", "h5", "hdf5", "sqlite", "db", "xml", "yaml", "yml", "zip", "gz")
_PATH = re.compile(r"(?<![\w/.~-])((?:~|\.{1,2})?/?[\w.~-]+(?:/[\w.~-]+)*\.(?:"
                   + "|".join(_EXTENSIONS) + r"))(?![\w/])", re.IGNORECASE)
_TEXT = frozenset({"csv", "tsv", "txt", "json", "jsonl", "xml", "yaml", "yml"})
_MAX_FILES = 5
_LINE_CHARS = 200


def named_paths(prompt: str) -> list[str]:
    """The file paths ``prompt`` names, in order, without duplicates."""
    seen: dict[str, None] = {}
    for match in _PATH.finditer(prompt):
        seen.setdefault(match.group(1).rstrip("."), None)
    return list(seen)[:_MAX_FILES]


def _first_line(path: Path, root: Path) -> str | None:
    try:
        head = read_project_file(path, _LINE_CHARS * 4, root).text
    except ProjectFileError:  # outside the project, not regular, not text: no first line
        return None
    return cut(head.split("\n", 1)[0].rstrip("\r"), _LINE_CHARS) or None


def file_notes(prompt: str, cwd: str | os.PathLike[str] | None = None) -> str | None:
    """One line per file the prompt names (exists or not, size, first line), or None."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    lines: list[str] = []
    for written in named_paths(prompt):
        path = Path(written).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            lines.append(f"File {written}: not found from the kernel's working directory ({base}).")
            continue
        size = path.stat().st_size
        line = f"File {written} exists ({size:,} bytes); open it with exactly this path"
        first = _first_line(path, project_root(base)) if path.suffix.lower().lstrip(".") in _TEXT else None
        lines.append(f"{line}. First line: {first}" if first else f"{line}.")
    return "\n".join(lines) if lines else None

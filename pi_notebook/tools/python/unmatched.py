"""A comparison with a text value no row has: ``df[df['room'] == 'Suite']`` when the column says
``suite``.

Such a filter raises nothing: it selects no rows (or, with ``!=``, every row), and the answer
computed from it is wrong without a sign (measured on the 1.5B: "@suite_share[0.0]" from an
empty selection, stated as the result). After a call, the code's comparisons of a DataFrame
column with a string literal (``==``, ``!=``, ``.isin([...])``, ``.eq(...)``) are looked up in
the frames they name; a literal that no row holds gets one note for the model, with the close
values the column does hold.

Bounded: at most ``MAX_COMPARISONS`` comparisons a call, ``MAX_ROWS`` rows of a column looked
at, ``MAX_DISTINCT`` distinct values compared for a suggestion. Only DataFrames of the user
namespace are read (metadata and those rows), nothing is run.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from ..trust.redact import redact

__all__ = ["unmatched_note"]

MAX_COMPARISONS = 8
MAX_ROWS = 200_000
MAX_DISTINCT = 2_000
MAX_NOTE_CHARS = 600


def _column_ref(node: ast.expr) -> tuple[str, str] | None:
    """(frame name, column) of ``name['col']`` or ``name.col``, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return node.value.id, key.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _strings(node: ast.expr) -> list[str]:
    """The string literal(s) of a comparison's other side: ``'x'`` or ``['x', 'y']``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _comparisons(tree: ast.AST) -> Iterator[tuple[str, str, str]]:
    """(frame, column, literal) of each comparison of a column with text in the code."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            sides = [node.left, node.comparators[0]]
            for ref_side, literal_side in (sides, sides[::-1]):
                ref = _column_ref(ref_side)
                if ref is not None:
                    for literal in _strings(literal_side):
                        yield (*ref, literal)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("isin", "eq", "ne") and node.args):
            ref = _column_ref(node.func.value)
            if ref is not None:
                for literal in _strings(node.args[0]):
                    yield (*ref, literal)


def _is_frame(value: Any) -> bool:
    cls = type(value)
    return cls.__module__.split(".")[0] == "pandas" and cls.__name__ == "DataFrame"


def _close(literal: str, values: list[str]) -> str | None:
    folded = {v.casefold(): v for v in values}
    if literal.casefold() in folded:
        return folded[literal.casefold()]
    stripped = {v.strip(): v for v in values}
    if literal.strip() in stripped:
        return stripped[literal.strip()]
    found = difflib.get_close_matches(literal, values, n=1, cutoff=0.75)
    return found[0] if found else None


def unmatched_note(code: str, user_ns: Mapping[str, Any]) -> str | None:
    """One line for the model naming the text values the code compares a column with that no
    row of that column holds (and the value it likely meant), or None."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    notes: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for frame_name, column, literal in _comparisons(tree):
        if (frame_name, column, literal) in seen or len(seen) >= MAX_COMPARISONS:
            continue
        seen.add((frame_name, column, literal))
        frame: Any = user_ns.get(frame_name)
        try:
            if not _is_frame(frame) or column not in frame.columns:
                continue
            rows = frame[column].head(MAX_ROWS)
            if rows.eq(literal).any():
                continue
            distinct = [v for v in rows.dropna().unique()[:MAX_DISTINCT] if isinstance(v, str)]
        except Exception:  # an odd column (unhashable values, a lying object) says nothing
            continue
        if not distinct:
            continue  # a column of numbers or dates compared with text: its own error says so
        close = _close(literal, distinct)
        meant = f" (it holds {close!r})" if close is not None else ""
        # (redacted before the line is cut: a cut secret is no longer recognised)
        notes.append(redact(f"{literal!r} matches no row of {frame_name}[{column!r}]{meant}"))
    if not notes:
        return None
    line = "; ".join(notes)
    if len(line) > MAX_NOTE_CHARS:
        line = line[:MAX_NOTE_CHARS - 1] + "…"
    return f"[note] {line}."

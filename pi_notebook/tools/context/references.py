"""Notebook references in a prompt: ``In[3]``, ``Out[3]``, ``_``, "the last cell", "cell 3".

``find_references(prompt)`` lists what a prompt refers to; ``reference_block(prompt, history,
user_ns)`` resolves them into one context block (or None when the prompt refers to nothing);
``expand_references(prompt, history, user_ns)`` is the prompt with that block appended. The
prompt text itself is never rewritten: the user's words stay as typed, the block adds what
they point at. The spellings are documented in docs/design/notebook-context.md:

- ``In[3]`` / ``In [3]`` / ``{In[3]}``: the source of the cell with execution count 3;
- ``Out[3]`` / ``{Out[3]}``: its ``Out`` value; ``Err[3]``: its error (jupyter-ai's spelling);
- ``_`` as a word on its own (``__``, ``___`` too): IPython's last ``Out`` values;
- "the last cell", "the previous cell", "the cell above", "my last cell": the most recent
  code cell; "the last error" / "the error": the most recent code cell that raised;
- "cell 3", "cell [3]", "cell #3", "cells 3-5": by execution count, as ``In[3]``; a position
  in the file ("the third cell") is not resolved: the agent reads it with ``read_notebook``.

Sources: the recorded history (tools/context/history.py: source, Out text, error); for cells run before
the recorder was installed, IPython's ``In`` list and ``Out`` dict in the user namespace. Values
are shown as bounded text (no ``repr`` of big objects), everything redacted before it is cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..output.format import cut
from .history import CellRecord, ExecutionHistory, bounded_value_text, format_record
from ..trust.credentials import redact_all as redact

__all__ = ["Reference", "expand_references", "find_references", "reference_block"]

RefKind = Literal["in", "out", "err", "cell", "last_cell", "last_error", "underscore"]

_INDEXED = re.compile(r"\{?\b(In|Out|Err)\s?\[(\d+)\]\}?")
_UNDERSCORE = re.compile(r"(?<![\w`'\".])(_{1,3})(?![\w(\[`'\".])")
_CELL = re.compile(r"\bcells?\s*(?:#|no\.?\s*|number\s*)?\[?(\d+)\]?"
                   r"(?:\s*(?:-|–|to)\s*\[?(\d+)\]?)?", re.IGNORECASE)
_LAST_CELL = re.compile(r"\b(?:the|my)\s+(?:last|previous|latest)\s+cell\b|\bthe\s+cell\s+above\b",
                        re.IGNORECASE)
_LAST_ERROR = re.compile(r"\bthe\s+(?:last\s+|latest\s+)?(?:error|exception|traceback)\b",
                         re.IGNORECASE)
_INDEXED_KIND: dict[str, RefKind] = {"In": "in", "Out": "out", "Err": "err"}
_MAX_RANGE = 10
_VALUE_CHARS = 1200
_BLOCK_CHARS = 6000


@dataclass(frozen=True)
class Reference:
    kind: RefKind
    count: int | None = None  # execution count; for "underscore", how many underscores
    text: str = ""  # as written in the prompt


def find_references(prompt: str) -> list[Reference]:
    """The references in ``prompt``, in order of first appearance, without duplicates."""
    found: list[tuple[int, Reference]] = []
    for m in _INDEXED.finditer(prompt):
        found.append((m.start(), Reference(_INDEXED_KIND[m.group(1)], int(m.group(2)), m.group(0))))
    for m in _CELL.finditer(prompt):
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        for n in range(first, min(last, first + _MAX_RANGE - 1) + 1):
            found.append((m.start(), Reference("cell", n, m.group(0))))
    for m in _LAST_CELL.finditer(prompt):
        found.append((m.start(), Reference("last_cell", None, m.group(0))))
    for m in _LAST_ERROR.finditer(prompt):
        found.append((m.start(), Reference("last_error", None, m.group(0))))
    for m in _UNDERSCORE.finditer(prompt):
        found.append((m.start(), Reference("underscore", len(m.group(1)), m.group(0))))
    found.sort(key=lambda item: item[0])
    seen: set[tuple[str, int | None]] = set()
    out = []
    for _, ref in found:
        key = (ref.kind, ref.count)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


def reference_block(prompt: str, history: ExecutionHistory | None, user_ns: Mapping[str, Any],
                    max_chars: int = _BLOCK_CHARS) -> str | None:
    """The resolved references as one text block, or None if the prompt has none."""
    refs = find_references(prompt)
    if not refs:
        return None
    parts: list[str] = []
    shown_cells: set[int] = set()
    for ref in refs:
        text = _resolve(ref, history, user_ns, shown_cells)
        if text:
            parts.append(text)
    if not parts:
        return None
    text = "[Notebook references in the prompt, resolved by pi_notebook]\n\n" + "\n\n".join(parts)
    return cut(redact(text), max_chars)


def expand_references(prompt: str, history: ExecutionHistory | None, user_ns: Mapping[str, Any]) -> str:
    """``prompt`` with its resolved references appended (unchanged when it has none)."""
    block = reference_block(prompt, history, user_ns)
    return prompt if block is None else f"{prompt}\n\n{block}"


def _resolve(ref: Reference, history: ExecutionHistory | None, user_ns: Mapping[str, Any],
             shown: set[int]) -> str | None:
    if ref.kind == "underscore":
        name = "_" * (ref.count or 1)
        value = user_ns.get(name, "")
        if isinstance(value, str) and value == "":
            return f"{name}: no previous output."
        return f"{name} ({_nth(ref.count or 1)}): " + _value(value)
    if ref.kind in ("last_cell", "last_error"):
        record = None
        if history is not None:
            record = history.last() if ref.kind == "last_cell" else _last_raised(history)
        if record is None:
            if ref.kind == "last_error":
                return None  # "the error" is also plain English ("the error rate"): stay quiet
            return (f"{ref.text!r}: no recorded cell (only cells run after pi_notebook was loaded "
                    "are recorded).")
        if record.execution_count is not None:
            if record.execution_count in shown:
                return None
            shown.add(record.execution_count)
        return f"{ref.text!r} is cell {record.label}:\n" + format_record(record)
    count = ref.count
    assert count is not None
    record = history.get(count) if history is not None else None
    if ref.kind == "err":
        if record is not None and record.error is not None:
            return f"Err[{count}]: {record.error.headline()}" + (
                "\n" + record.error.traceback if record.error.traceback else "")
        return f"Err[{count}]: " + (f"cell [{count}] did not raise." if record is not None
                                   else "no recorded error for that cell.")
    if ref.kind == "out":
        if record is not None and record.result is not None:
            return f"Out[{count}]: {record.result}"
        out = user_ns.get("Out")
        if isinstance(out, Mapping) and count in out:
            return f"Out[{count}]: " + _value(out[count])
        return f"Out[{count}]: no output recorded for that cell."
    # "in" and "cell": the whole record when there is one, else IPython's input history
    if count in shown:
        return None
    shown.add(count)
    if record is not None:
        return format_record(record) if ref.kind == "cell" else f"In[{count}]:\n{record.source}"
    inputs = user_ns.get("In")
    if isinstance(inputs, list) and 0 < count < len(inputs):
        return f"In[{count}]:\n" + cut(redact(str(inputs[count])), _VALUE_CHARS)
    ran = len(inputs) - 1 if isinstance(inputs, list) else 0
    return f"{ref.text!r}: no cell with execution count {count}" + (
        f" (cells run so far: 1..{ran})." if ran > 0 else ".")


def _last_raised(history: ExecutionHistory) -> CellRecord | None:
    for record in reversed(history.records()):
        if record.kind == "code" and record.error is not None and not record.interrupted:
            return record
    return None


def _nth(n: int) -> str:
    return {1: "the last output", 2: "the output before it"}.get(n, "the third-last output")


def _value(value: Any) -> str:
    return cut(redact(bounded_value_text(value)), _VALUE_CHARS)

"""No ``Any`` in a parameter or attribute of ``pi_notebook/widgets``.

The widgets read typed agent events and messages; where a value really is open (a MIME
bundle's data, a tool call's arguments as the model sent them) it is ``object`` and the
reader checks what it got. An ``Any`` hidden behind a module-level alias counts too.

The one foreign package without type information the widgets use is ipywidgets: its
classes are named in annotations (``W.Button``, ``W.Widget``) and mypy sees them as
``Any``; that needs no entry below. An annotation that must say ``Any`` because a foreign
object is untyped goes in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

from pathlib import Path

from any_annotations import any_annotations as _walk

import pi_notebook.widgets

WIDGETS = Path(pi_notebook.widgets.__file__).parent

# (file name, "function or class.attribute", parameter or attribute name) -> why it is Any
ALLOWED: dict[tuple[str, str, str], str] = {}


def any_annotations(source: str, filename: str) -> list[tuple[str, str, str]]:
    """(file, owner, name) of every parameter, attribute and module-level alias whose
    annotation mentions ``Any`` (a local variable inside a function is not checked here)."""
    return [(f.file, f.owner, f.name) for f in _walk(source, filename) if f.kind != "local"]


def test_the_checker_sees_each_kind_of_annotation():
    source = '''
from typing import Any
Alias = dict[str, Any]
def f(a: int, b: "Any", *c: Any, d: list[Any] | None = None, **e: object) -> Any: ...
class C:
    x: Any
    y: int
    def m(self, z: Callable[..., Any]) -> None:
        self.w: dict[str, Any] = {}
        local: Any = 1
'''
    assert sorted(any_annotations(source, "t.py")) == sorted([
        ("t.py", "", "Alias"), ("t.py", "f", "b"), ("t.py", "f", "c"), ("t.py", "f", "d"),
        ("t.py", "C", "x"), ("t.py", "C.m", "z"), ("t.py", "C", "w"),
    ])


def test_no_any_in_widget_parameters_or_attributes():
    found = set()
    for path in sorted(WIDGETS.glob("*.py")):
        found.update(any_annotations(path.read_text(encoding="utf-8"), path.name))
    unexplained = sorted(found - set(ALLOWED))
    assert not unexplained, f"Any in widgets annotations (type them, or allow-list with a reason): {unexplained}"
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"allow-list entries that no longer occur: {stale}"

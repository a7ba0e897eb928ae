"""No ``Any`` in a parameter or attribute of ``pi_notebook/widgets`` (issue 19).

The widgets read typed agent events and messages; where a value really is open (a MIME
bundle's data, a tool call's arguments as the model sent them) it is ``object`` and the
reader checks what it got. An ``Any`` hidden behind a module-level alias counts too.

The one foreign package without type information the widgets use is ipywidgets: its
classes are named in annotations (``W.Button``, ``W.Widget``) and mypy sees them as
``Any``; that needs no entry below. An annotation that must say ``Any`` because a foreign
object is untyped goes in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pi_notebook.widgets

WIDGETS = Path(pi_notebook.widgets.__file__).parent

# (file name, "function or class.attribute", parameter or attribute name) -> why it is Any
ALLOWED: dict[tuple[str, str, str], str] = {}


def _mentions_any(node: ast.AST | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if _mentions_any(ast.parse(sub.value, mode="eval")):
                    return True
            except SyntaxError:
                pass
    return False


def _is_annotation_alias(value: ast.AST) -> bool:
    """``X = dict[str, Any]`` or ``X = Callable[..., Any]``: an alias, not a value."""
    return isinstance(value, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)) and _mentions_any(value)


def any_annotations(source: str, filename: str) -> list[tuple[str, str, str]]:
    """(file, owner, name) of every parameter, attribute and module-level alias whose
    annotation mentions ``Any``."""
    found: list[tuple[str, str, str]] = []
    tree = ast.parse(source)

    def visit(node: ast.AST, owner: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{owner}.{child.name}" if owner else child.name
                a = child.args
                for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                    if arg is not None and _mentions_any(arg.annotation):
                        found.append((filename, name, arg.arg))
                for sub in ast.walk(child):  # self.x: T = ... anywhere in a method
                    if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Attribute) \
                            and _mentions_any(sub.annotation):
                        found.append((filename, owner or name, sub.target.attr))
                visit(child, name, False)
            elif isinstance(child, ast.AnnAssign) and (in_class or not owner):
                if _mentions_any(child.annotation):
                    found.append((filename, owner, ast.unparse(child.target)))
            elif isinstance(child, ast.Assign) and not owner and _is_annotation_alias(child.value):
                found.append((filename, "", ast.unparse(child.targets[0])))

    visit(tree, "", False)
    return found


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

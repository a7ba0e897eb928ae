"""What a cell of agent code may do to the user's names, read from its text before it runs.

``read_code(code) -> CodeEffects``: the names the code's top level assigns (``=``, ``+=``,
``for``, ``with ... as``, ``import``, ``:=``), deletes (``del``), changes through a subscript or
attribute store (``df['x'] = ...``, ``df.loc[...] = ...``, ``obj.attr = ...``, ``del d['k']``),
or calls a known mutating method on (``lst.append``, ``d.update``, ``arr.sort``, any call with
``inplace=True``). Function and class bodies are local, except names they declare ``global``.
Calls that can change any name unseen (``exec``, ``globals()``, ``setattr``...) are listed as
such. Nothing is run: this is a reading of the syntax tree, an estimate that the after-check
(``changes.py``) confirms.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

__all__ = ["CodeEffects", "EffectKind", "NameEffect", "MUTATING_METHODS", "read_code"]

EffectKind = Literal["assigns", "deletes", "changes", "calls"]

# Methods of the built-in containers, numpy arrays and pandas objects that change their
# object in place (without ``inplace=True``, which is read separately).
MUTATING_METHODS = frozenset({
    # list, dict, set, bytearray
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "update",
    "setdefault", "popitem", "add", "discard", "difference_update", "intersection_update",
    "symmetric_difference_update",
    # numpy
    "fill", "resize", "put", "itemset", "setflags", "partition",
    # pandas (DataFrame.insert/update/pop are covered above)
    "set_axis_inplace", "rename_axis_inplace",
})

# Methods that act outside the kernel (files, databases, processes): nothing undo can take back.
OUTSIDE_METHODS = frozenset({
    "to_csv", "to_parquet", "to_excel", "to_json", "to_pickle", "to_sql", "to_feather", "to_hdf",
    "to_stata", "savefig", "savez", "savez_compressed", "tofile", "write_text", "write_bytes",
    "unlink", "rmdir", "rmtree", "remove", "rename", "execute", "executemany", "executescript",
    "commit", "system", "getoutput", "popen", "run_line_magic", "run_cell_magic",
})
_OUTSIDE_FUNCTIONS = frozenset({"remove", "unlink", "rmtree", "rename", "system", "run", "call",
                                "check_call", "check_output", "Popen"})

# Calls through which code can rebind any name without naming it.
_DYNAMIC = frozenset({"exec", "eval", "globals", "vars", "setattr", "delattr", "locals", "__import__"})

_DETAIL_CHARS = 60


@dataclass(frozen=True)
class NameEffect:
    """One thing the code does to one top-level name."""

    name: str
    kind: EffectKind
    detail: str = ""  # the statement's target or call, shortened: "df.drop(..., inplace=True)"


@dataclass(frozen=True)
class CodeEffects:
    """The reading of one cell of code."""

    effects: tuple[NameEffect, ...] = ()
    dynamic: tuple[str, ...] = ()  # exec, globals, setattr... called: other names may change too
    outside: tuple[str, ...] = ()  # calls that write files, databases or run processes (shortened)
    unreadable: bool = False  # not Python after IPython's transforms: nothing could be read
    # every identifier in the code: names, attribute names, arguments, imports, and string
    # constants that look like names (``getattr(m, "x")``): a superset of the names it reaches
    mentioned: frozenset[str] = frozenset()
    shell_calls: bool = False  # calls ``get_ipython()`` (``%magic`` lines do): ``%run`` & co.

    @property
    def reaches_all(self) -> bool:
        """The code can touch names it does not mention (exec, globals(), a magic...)."""
        return self.unreadable or bool(self.dynamic) or self.shell_calls

    @property
    def names(self) -> frozenset[str]:
        """Every name the code may change (assign, delete or change in place)."""
        return frozenset(e.name for e in self.effects)

    @property
    def changed_in_place(self) -> frozenset[str]:
        """Names whose object (not binding) the code may change: these need a copy to undo."""
        return frozenset(e.name for e in self.effects if e.kind in ("changes", "calls"))

    def of(self, name: str) -> tuple[NameEffect, ...]:
        return tuple(e for e in self.effects if e.name == name)


def read_code(code: str) -> CodeEffects:
    """Read ``code`` (plain Python: IPython syntax already transformed by the caller)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return CodeEffects(unreadable=True)
    reader = _Reader()
    for statement in tree.body:
        reader.visit(statement)
    mentioned = _identifiers(tree)
    return CodeEffects(effects=tuple(reader.effects), dynamic=tuple(sorted(reader.dynamic)),
                       outside=tuple(reader.outside), mentioned=mentioned,
                       shell_calls="get_ipython" in mentioned)


def _identifiers(tree: ast.AST) -> frozenset[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and type(node.value) is str and node.value.isidentifier():
            found.add(node.value)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.arg, ast.keyword)):
            if node.arg is not None:  # (a ``**kwargs`` keyword has none)
                found.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler))
              and node.name):  # (``except E:`` binds none)
            found.add(node.name)
    return frozenset(found)


def _short(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # an unusual tree: the kind of effect still says enough
        return ""
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _root_name(node: ast.expr) -> str | None:
    """``df`` of ``df.loc[1, 'x']``, ``d['a']['b']``, ``obj.attr.inner``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _acts_outside(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name == "open":  # open(path, "w"), open(path, mode="a")
        modes = [a for a in node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
        return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+")
                   for m in modes)
    if isinstance(func, ast.Attribute):
        return name in OUTSIDE_METHODS
    return name in _OUTSIDE_FUNCTIONS


class _Reader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.effects: list[NameEffect] = []
        self.dynamic: set[str] = set()
        self.outside: list[str] = []
        self._seen: set[tuple[str, str, str]] = set()

    def _add(self, name: str | None, kind: EffectKind, detail: str = "") -> None:
        if name is None:
            return
        key = (name, kind, detail)
        if key not in self._seen:
            self._seen.add(key)
            self.effects.append(NameEffect(name, kind, detail))

    def _target(self, target: ast.expr, kind: EffectKind = "assigns") -> None:
        if isinstance(target, ast.Name):
            self._add(target.id, kind)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, kind)
        elif isinstance(target, ast.Starred):
            self._target(target.value, kind)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            verb = "del " if kind == "deletes" else ""
            suffix = "" if kind == "deletes" else " = …"
            self._add(_root_name(target), "changes", f"{verb}{_short(target)}{suffix}")
            self.visit(target)  # calls inside the target (d[f(x)] = ...)

    # -- statements that bind names --
    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
            self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            # ``lst += [1]`` changes a list in place, ``n += 1`` rebinds: both may change it
            self._add(node.target.id, "changes", _short(node).split("\n")[0])
        else:
            self._target(node.target)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target, "deletes")

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._target(node.target)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._target(item.optional_vars)
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._add((alias.asname or alias.name).split(".")[0], "assigns")

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._add(node.name, "assigns")
        self.generic_visit(node)

    # -- definitions: the name is bound; the body is local except its ``global`` names --
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._add(node.name, "assigns")
        for inner in ast.walk(node):
            if isinstance(inner, ast.Global):
                for name in inner.names:
                    self._add(name, "assigns", f"global {name} in {node.name}()")
            elif isinstance(inner, ast.Call):
                self._call(inner)  # a helper that mutates a user's list still mutates it

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for inner in ast.walk(node.body):
            if isinstance(inner, ast.Call):
                self._call(inner)

    # -- calls --
    def visit_Call(self, node: ast.Call) -> None:
        self._call(node)
        self.generic_visit(node)

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _DYNAMIC:
            self.dynamic.add(func.id)
            return
        if _acts_outside(node) and len(self.outside) < 8:
            detail = f"{_short(func)}(…)"
            if detail not in self.outside:
                self.outside.append(detail)
        if not isinstance(func, ast.Attribute):
            return
        inplace = any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                      for k in node.keywords)
        if func.attr in MUTATING_METHODS or inplace:
            receiver = _short(func.value)
            detail = f"{receiver}.{func.attr}(..., inplace=True)" if inplace else f"{receiver}.{func.attr}(…)"
            self._add(_root_name(func.value), "calls", detail)

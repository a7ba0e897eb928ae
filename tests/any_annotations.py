"""Where ``Any`` stands in the annotations of a module (the rule: no ``Any`` in a parameter
or attribute of the notebook layer). One walker for the checks of ``widgets/`` and
``magics/``; each check keeps its own allow-list of what may stay untyped, and why."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AnyAnnotation:
    file: str
    owner: str      # "function", "Class", "Class.method" or "" (module level)
    name: str       # the parameter, attribute, local or alias
    line: int
    kind: Literal["parameter", "attribute", "local", "alias"]
    bare: bool = False  # an alias that is ``Any`` itself (a name for a foreign untyped object)


def is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any")


def mentions_any(node: ast.AST | None) -> bool:
    """``Any`` anywhere in an annotation, quoted parts (``"list[Any]"``) included."""
    if node is None:
        return False
    for sub in ast.walk(node):
        if is_any(sub):
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                if mentions_any(ast.parse(sub.value, mode="eval")):
                    return True
            except SyntaxError:
                pass
    return False


def _aliases(tree: ast.Module, filename: str) -> list[AnyAnnotation]:
    """``X = Any``, ``X: TypeAlias = Any``, ``X = dict[str, Any]``, ``X = Callable[..., Any]``
    at module level: names for types, not values."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            value, targets = node.value, node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None and is_any(node.value):
            value, targets = node.value, [node.target]
        else:
            continue
        if isinstance(value, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)) and mentions_any(value):
            found += [AnyAnnotation(filename, "", ast.unparse(t), node.lineno, "alias", is_any(value))
                      for t in targets]
    return found


def any_annotations(source: str, filename: str) -> list[AnyAnnotation]:
    """Every parameter (of lambdas too), attribute (``self.x: T`` belongs to the class), local
    and module-level alias whose annotation mentions ``Any``."""
    tree = ast.parse(source)
    found = _aliases(tree, filename)
    aliased = {id(node) for node in tree.body if isinstance(node, ast.AnnAssign) and node.value is not None
               and is_any(node.value)}

    def visit(node: ast.AST, owner: str, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, False)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                name = getattr(child, "name", "lambda")
                inner = f"{owner}.{name}" if owner else name
                a = child.args
                found.extend(AnyAnnotation(filename, inner, arg.arg, arg.lineno, "parameter")
                             for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                             if arg is not None and mentions_any(arg.annotation))
                visit(child, inner, True)
            else:
                if isinstance(child, ast.AnnAssign) and id(child) not in aliased and mentions_any(child.annotation):
                    target = child.target
                    if isinstance(target, ast.Attribute):  # self.x: T in a method
                        cls = owner.rsplit(".", 1)[0] if "." in owner else owner
                        found.append(AnyAnnotation(filename, cls, target.attr, child.lineno, "attribute"))
                    else:
                        found.append(AnyAnnotation(filename, owner, ast.unparse(target), child.lineno,
                                                   "local" if in_function else "attribute"))
                visit(child, owner, in_function)

    visit(tree, "", False)
    return found

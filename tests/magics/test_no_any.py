"""No ``Any`` in a parameter or attribute annotation of ``pi_notebook/magics``.

An object pi_notebook does not own and that has no useful types is named by an alias, and
each alias is listed here, with why, in :data:`FOREIGN_UNTYPED`: the one place that says
which foreign objects stay untyped. A new ``Something = Any`` in the notebook layer fails
the test until it is listed; so does an entry whose alias no longer exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

from any_annotations import any_annotations, mentions_any

ROOT = Path(__file__).resolve().parents[2] / "pi_notebook"
# the notebook layer, and the small model's run checks it applies (local/checks.py, local/apply.py)
CHECKED = [*sorted((ROOT / "magics").glob("*.py")), ROOT / "local" / "checks.py", ROOT / "local" / "apply.py"]
# where the notebook layer's aliases for foreign untyped objects may be defined
ALIAS_HOMES = [*CHECKED, ROOT / "tools" / "kernel" / "kernel_host.py"]

FOREIGN_UNTYPED = {
    # ipykernel's Kernel: 6.x and 7.x differ in exactly the attributes the adapter reads
    # (shell_stream vs shell_channel_thread, _parent_ident, dispatch_shell's signature); only
    # tools/kernel/kernel_host.py touches it, each attribute read with a default
    "ForeignKernel": "tools/kernel/kernel_host.py",
    # an ipywidgets Widget: ipywidgets ships no types; frontend.py sets and reads its
    # view-count trait and closes its models
    "ForeignWidget": "magics/frontend.py",
    # a value in the user's namespace: anything the user made; the small-model checks read
    # DataFrames by duck typing (columns, rows) without importing pandas
    "UserValue": "local/checks.py",
}


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(ROOT)
    return [f"{rel}:{f.line} {f.owner}({f.name})" for f in any_annotations(path.read_text(), str(rel))
            if f.kind != "alias"]


def _any_aliases(path: Path) -> list[str]:
    return [f.name for f in any_annotations(path.read_text(), path.name) if f.kind == "alias" and f.bare]


def test_the_checker_sees_any_where_it_hides():
    source = ("def f(a: Any, *b: 'list[Any]', c: typing.Any = 1, **d: dict[str, Any]) -> Any: ...\n"
              "class C:\n    x: Any\n    def __init__(self):\n        self.y: 'Any' = 1\n")
    tree = ast.parse(source)
    func = tree.body[0]
    assert all(mentions_any(a.annotation)
               for a in [*func.args.args, func.args.vararg, *func.args.kwonlyargs, func.args.kwarg])
    assert [mentions_any(n.annotation) for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)] == [True, True]
    assert not mentions_any(ast.parse("dict[str, object]", mode="eval").body)


def test_no_any_in_parameters_or_attributes_of_the_magics():
    found = [v for path in CHECKED for v in _violations(path)]
    assert not found, "Any in magics annotations (type them, or name the foreign object in " \
                      f"FOREIGN_UNTYPED): {found}"


def test_every_alias_for_a_foreign_untyped_object_is_listed_once():
    defined = {alias: str(path.relative_to(ROOT)) for path in ALIAS_HOMES for alias in _any_aliases(path)}
    assert defined == FOREIGN_UNTYPED

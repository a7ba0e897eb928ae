"""Which of the user's names one call of agent code can change in place: the names whose
contents are worth fingerprinting around the call (docs/design/review.md, "What is compared").

``reachable(effects, items, protect) -> frozenset[str] | None`` (None: every name). A rebinding,
a deletion or a new name is seen for every name whatever this says (identities are compared
across the whole namespace); this only decides whose *contents* are compared. Starting from
the identifiers the code mentions (``reading.py``) and the protected names, it adds, until
nothing more is found:

- the names the code of a reached function mentions (``co_names`` of its code and the code
  nested in it), and of the methods of a reached class or instance defined in the notebook
  (a helper that appends to a global list reaches that list);
- the names bound to an object a reached value holds or is: ``b = a`` makes ``a`` reached
  with ``b``; so does a list held in a reached dict, in a function's closure or defaults, in
  a ``functools.partial``'s arguments, in a paused generator's locals, in an attribute of an
  instance of any class written in Python, or of a class of the notebook's.

Looking is bounded: past ``MAX_HELD`` objects the call reaches every name (the full
comparison, no shortcut).

Code that can reach anything (``exec``, ``globals()``, a ``%magic``, unreadable code) reaches
every name. Nothing of the user's runs: types are checked exactly, containers walked like the
fingerprints walk them (bounded: ``SAMPLE`` items, ``DEPTH`` levels).

What this can miss (said in docs/design/review.md): a change inside a name that holds a
reached object but is not itself reached (``outer = [inner]``; code changes ``inner``:
``inner`` is reported, ``outer`` is not); an object bound to a name that sits more than
``DEPTH`` levels inside a reached one, or inside an object written in C; code in another
module that writes into ``__main__``; and a user cell that runs while the agent's code runs
and changes an unreached name in place.
"""

from __future__ import annotations

import functools
import gc
import types
from collections.abc import Iterable, Iterator

from .fingerprint import DEPTH, SAMPLE, known_kind
from .reading import CodeEffects

__all__ = ["reachable"]

_SCALAR_KINDS = frozenset({"int", "float", "complex", "bool", "NoneType", "str", "bytes"})
_USER_MODULE = "__main__"  # where a notebook's own functions and classes live
MAX_HELD = 20_000  # objects looked at to find what one call reaches; beyond it, every name
_GENERATORS = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
_CLASS_DICT = type.__dict__["__dict__"]  # a class's own namespace, whatever its metaclass says


class _TooMuch(Exception):
    """More than MAX_HELD objects: following them costs more than comparing every name."""


def reachable(effects: CodeEffects, items: Iterable[tuple[str, object]],
              protect: Iterable[str] = ()) -> frozenset[str] | None:
    if effects.reaches_all:
        return None
    by_name = dict(items)
    by_id: dict[int, list[str]] = {}
    for name, value in by_name.items():
        by_id.setdefault(id(value), []).append(name)
    reached: set[str] = set()
    todo = [n for n in (*effects.mentioned, *protect) if n in by_name]
    seen_code: set[int] = set()
    held: dict[int, int] = {}  # id -> the most levels looked into below it (MAX_HELD objects at most)
    try:
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            found: set[str] = set()
            for inner in _held(by_name[name], DEPTH, held):
                found.update(_code_names(inner, seen_code))
                found.update(by_id.get(id(inner), ()))
            todo.extend(n for n in found if n in by_name and n not in reached)
    except _TooMuch:
        return None
    return frozenset(reached)


def _held(value: object, depth: int, seen: dict[int, int]) -> Iterator[object]:
    """``value`` and the objects it holds (bounded); an object already looked into as deep
    (``seen``) is not looked into again."""
    if seen.get(id(value), -1) >= depth:
        return
    seen[id(value)] = depth
    if len(seen) > MAX_HELD:
        raise _TooMuch
    yield value
    if depth <= 0:
        return
    cls = type(value)
    children: Iterable[object] = ()
    if cls in (list, tuple):
        seq: list[object] | tuple[object, ...] = value  # type: ignore[assignment]  # cls is list or tuple
        children = seq if len(seq) <= SAMPLE else (*seq[:SAMPLE // 2], *seq[-SAMPLE // 2:])
    elif cls is dict:
        mapping: dict[object, object] = value  # type: ignore[assignment]  # cls is dict
        children = list(mapping.values())[:SAMPLE] if len(mapping) > SAMPLE else mapping.values()
    elif cls in (set, frozenset):
        members: set[object] = value  # type: ignore[assignment]  # cls is set or frozenset
        children = [] if len(members) > SAMPLE else list(members)
    elif cls is types.FunctionType:
        fn: types.FunctionType = value  # type: ignore[assignment]  # checked by exact type
        cells = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        children = (*cells, *(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())
    elif cls is types.MethodType:
        method: types.MethodType = value  # type: ignore[assignment]  # checked by exact type
        children = (method.__func__, method.__self__)
    elif cls is functools.partial:
        part: functools.partial[object] = value  # type: ignore[assignment]  # checked by exact type
        children = (part.func, *part.args, *part.keywords.values())
    elif issubclass(cls, type):  # a class (no __class__ of the user's is read)
        own = _CLASS_DICT.__get__(value)
        if own.get("__module__") == _USER_MODULE:
            children = list(own.values())  # its attributes and methods
    elif cls in _GENERATORS or (cls.__module__ != "builtins" and known_kind(value) is None):
        # an instance of a class of Python code, or a paused generator: what it holds (its
        # __dict__ and slots, a generator's locals), read by the garbage collector's
        # traversal (no attribute lookup, none of its code runs)
        children = [r for r in gc.get_referents(value) if r is not cls]
    for child in children:
        kind = known_kind(child)
        if kind not in _SCALAR_KINDS:
            yield from _held(child, depth - 1, seen)


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  # an empty cell raises
    except ValueError:
        return False
    return True


def _code_names(value: object, seen: set[int]) -> set[str]:
    """The global names the code behind ``value`` mentions: a function's, or the methods of a
    class (or of an instance of a class) defined in the notebook."""
    cls = type(value)
    if cls is types.FunctionType:
        return _names_of(value.__code__, seen)  # type: ignore[attr-defined]  # checked by exact type
    if cls is types.MethodType:
        return _code_names(value.__func__, seen)  # type: ignore[attr-defined]  # checked by exact type
    if cls in _GENERATORS:
        code = getattr(value, {types.GeneratorType: "gi_code", types.CoroutineType: "cr_code"}.get(cls, "ag_code"))
        return _names_of(code, seen)
    klass: type = value if issubclass(cls, type) else cls  # type: ignore[assignment]  # value is a class here
    names: set[str] = set()
    for base in klass.__mro__:
        if base.__module__ != _USER_MODULE or id(base) in seen:
            continue
        seen.add(id(base))
        for member in list(_CLASS_DICT.__get__(base).values()):
            for fn in _functions_of(member):
                names |= _names_of(fn.__code__, seen)
    return names


def _functions_of(member: object) -> tuple[types.FunctionType, ...]:
    if type(member) is types.FunctionType:
        return (member,)
    if type(member) in (staticmethod, classmethod):
        inner = member.__func__  # type: ignore[attr-defined]  # checked by exact type
        return (inner,) if type(inner) is types.FunctionType else ()
    if type(member) is property:
        return tuple(f for f in (member.fget, member.fset, member.fdel) if type(f) is types.FunctionType)
    return ()


def _names_of(code: types.CodeType, seen: set[int]) -> set[str]:
    if id(code) in seen:
        return set()
    seen.add(id(code))
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _names_of(const, seen)
    return names

"""Every attribute pi_notebook replaces on an object it does not own, in one registry.

The notebook layer has to change a few foreign objects while it is loaded (IPython's
shell, ipykernel's kernel, ``sys``, ``builtins``, ``threading.Thread``, ipywidgets'
construction callback). Each replacement goes through :data:`PATCHES`, which records
what was there, what replaced it and *why*, and puts the original back on undo:

- a replacement still in place is undone: the original is set back, or, when the
  replacement only shadowed a class attribute (an instance attribute over a method),
  the instance attribute is deleted so the class's own shows again;
- a replacement that someone else replaced since is left alone (theirs wraps ours;
  each patch passes through once its owner is not active) and only dropped from the list.

``%unload_ext pi_notebook`` undoes them all: each module that patches undoes its own
patches in its uninstall step (``PATCHES.undo``), and ``tests/magics/test_unload.py`` checks
that the list is empty afterwards. ``PATCHES.describe()`` is the answer to "what does
pi_notebook change in my kernel?".
"""

from __future__ import annotations

import inspect
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Patch", "Patches", "PATCHES"]

_MISSING = object()


@dataclass(eq=False)
class Patch:
    """One replaced attribute: ``owner.name`` was ``original``, is ``replacement``."""

    owner: object
    name: str
    original: object
    replacement: object
    why: str
    # the original was the owner's own attribute (else: inherited from its class, and the
    # replacement shadows it as an instance attribute)
    own: bool = True
    # for a slot set through an API rather than setattr (a stream's receive callback):
    # how to put the original back
    restore: Callable[[], None] | None = field(default=None, repr=False)

    def in_place(self) -> bool:
        """Is the replacement still what ``owner.name`` holds?"""
        if self.restore is not None:
            return True
        if not self.own:  # an instance attribute over a method: it must still be there
            return _own_value(self.owner, self.name) is self.replacement
        return getattr(self.owner, self.name, _MISSING) is self.replacement

    def undo(self) -> bool:
        """Put the original back if the replacement is still in place (True when it was)."""
        if self.restore is not None:
            self.restore()
            return True
        if not self.in_place():
            return False
        if self.own or isinstance(self.owner, types.ModuleType):
            setattr(self.owner, self.name, self.original)
        else:
            delattr(self.owner, self.name)
        return True


def _shadows_method(owner: object, name: str) -> bool:
    """Would setting ``owner.name`` put an instance attribute over a method of its class
    (to undo it, delete the attribute)? Not for modules, classes and descriptors such as
    traitlets, whose value setattr stores elsewhere."""
    if isinstance(owner, (types.ModuleType, type)) or _own_value(owner, name) is not _MISSING:
        return False
    try:
        found = inspect.getattr_static(type(owner), name)
    except AttributeError:
        return True  # a new attribute: undo deletes it
    return isinstance(found, (types.FunctionType, types.BuiltinFunctionType))


def _own_value(owner: object, name: str) -> object:
    try:
        return vars(owner).get(name, _MISSING)
    except TypeError:  # no __dict__ (slots)
        return getattr(owner, name, _MISSING)


class Patches:
    """The registry (one per process: :data:`PATCHES`)."""

    def __init__(self) -> None:
        self._patches: list[Patch] = []
        self._lock = threading.Lock()

    def apply(self, owner: object, name: str, replacement: object, why: str) -> Patch:
        """``owner.name = replacement``, recorded with the original and the reason."""
        original = getattr(owner, name)
        own = not _shadows_method(owner, name)
        setattr(owner, name, replacement)
        patch = Patch(owner, name, original, replacement, why, own)
        with self._lock:
            self._patches.append(patch)
        return patch

    def record(self, owner: object, name: str, original: object, replacement: object, why: str,
               restore: Callable[[], None]) -> Patch:
        """A replacement made through the owner's own API: ``restore()`` undoes it."""
        patch = Patch(owner, name, original, replacement, why, restore=restore)
        with self._lock:
            self._patches.append(patch)
        return patch

    def find(self, owner: object, name: str) -> Patch | None:
        """The newest patch of ``owner.name`` still listed."""
        with self._lock:
            return next((p for p in reversed(self._patches) if p.owner is owner and p.name == name), None)

    def original(self, replacement: object) -> object | None:
        """What ``replacement`` (one of ours) replaced, or None."""
        with self._lock:
            return next((p.original for p in self._patches if p.replacement is replacement), None)

    def undo(self, patch: Patch | None) -> bool:
        """Undo one patch and drop it from the list (True when it was still in place)."""
        if patch is None:
            return False
        with self._lock:
            if patch not in self._patches:
                return False
            self._patches.remove(patch)
        return patch.undo()

    def listed(self) -> list[Patch]:
        with self._lock:
            return list(self._patches)

    def describe(self) -> list[str]:
        """One line per patch: what, and why."""
        return [f"{_label(p.owner)}.{p.name}: {p.why}" for p in self.listed()]


def _label(owner: object) -> str:
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    if isinstance(owner, type):
        return owner.__qualname__
    return type(owner).__name__


PATCHES = Patches()

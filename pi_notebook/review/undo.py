"""Copies of the user's names taken before agent code ran, and putting them back.

A :class:`RunRecord` holds, for one run, each name as it was before the run's first call that
could touch it: bound or not, the object it was bound to (``refs`` for every name, ``saved``
for the names a call could reach), and (for the names the code was read to change in place,
the protected names, and small reached values of known types) a copy.
``copy_value`` copies only known types by exact type check (the built-in containers, numpy
arrays, pandas frames and series: no ``__deepcopy__`` or ``__reduce__`` of the user's classes
runs); anything else is kept by reference, which restores a rebinding or a deletion but not a
change inside it. Copies count against a budget in bytes (``UndoStack.budget``); the oldest
runs' copies are dropped first when a new run needs room.

``UndoStack.undo(namespace, fingerprint_now)`` restores the newest run's changed names: a name
whose value is no longer what the run left (the user changed it since) is left alone and
named; a name changed in place whose copy is missing (over the budget, not copyable) is named
as not restored. Runs are undone newest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .changes import NameChange
from .fingerprint import Fingerprint, fingerprint, known_kind, skipped

__all__ = ["DEFAULT_BUDGET", "RunRecord", "Saved", "UndoReport", "UndoStack", "copy_value", "size_text", "size_of"]

DEFAULT_BUDGET = 512 * 2**20
SMALL_COPY = 64 * 1024  # values of known types below this are copied even when not read to change
SMALL_TOTAL = 16 * 2**20  # the whole of those small copies per run
MAX_RUNS = 20  # runs kept for undo
_ITEM_BYTES = 64  # a rough size per element of a built-in container (pointer, object header)

_UNSET = object()


def size_of(value: Any, depth: int = 3) -> int | None:
    """Bytes a copy of ``value`` would take, roughly; None when it is not one copy_value makes."""
    kind = known_kind(value)
    if kind is None:
        return None
    if kind == "ndarray":
        return int(value.nbytes)
    if kind == "DataFrame":
        # 8 bytes a cell and an index entry: numbers and object pointers alike (memory_usage
        # would build a Series per call; the budget needs the order of magnitude)
        return 64 + int(value.shape[0]) * (int(value.shape[1]) + 1) * 8
    if kind in ("Series", "Index", "RangeIndex"):
        return 64 + len(value) * 16
    if kind in ("str", "bytes"):
        return len(value) + 64
    if kind in ("list", "tuple", "dict", "set", "frozenset"):
        if depth <= 0:
            return None
        items: Any = list(value.values()) if type(value) is dict else value
        total = 64 + _ITEM_BYTES * len(items)
        if len(items) > 100_000:  # estimated from a sample, not walked whole
            sample = list(items)[:1000] if not isinstance(items, list) else items[:1000]
            part = 0
            for element in sample:
                n = size_of(element, depth - 1)
                if n is None:
                    return None
                part += n
            return total + part * len(items) // max(1, len(sample))
        for element in items:
            n = size_of(element, depth - 1)
            if n is None:
                return None
            total += n
        return total
    return 32  # a scalar


def copy_value(value: Any, depth: int = 3) -> object:
    """A copy of a value of a known type; TypeError for anything else."""
    cls = type(value)
    kind = known_kind(value)
    if kind is None:
        raise TypeError(f"a {cls.__name__} is not copied")
    if kind in ("int", "float", "complex", "bool", "NoneType", "str", "bytes"):
        return value  # immutable
    if kind in ("ndarray", "DataFrame", "Series", "Index", "RangeIndex"):
        return value.copy()
    if depth <= 0:
        raise TypeError("nested too deep to copy")
    if cls is list:
        return [copy_value(v, depth - 1) for v in value]
    if cls is tuple:
        return tuple(copy_value(v, depth - 1) for v in value)
    if cls is dict:
        return {k: copy_value(v, depth - 1) for k, v in value.items()}
    if cls is set:
        return set(value)
    return value  # frozenset


@dataclass
class Saved:
    """One name as it was before the run changed it."""

    bound: bool
    ref: object = None  # the object the name was bound to
    copy: object = _UNSET  # its copy, when one was taken
    why_not: str = ""  # why there is no copy ("over the undo budget of 512 MB", ...)
    size: int = 0
    before: Fingerprint | None = None  # its fingerprint then: was the old object changed since?

    @property
    def has_copy(self) -> bool:
        return self.copy is not _UNSET


@dataclass
class RunRecord:
    label: str
    saved: dict[str, Saved] = field(default_factory=dict)  # the names a call of the run could reach
    # every name bound when the run's calls first saw it, by reference: enough to undo a
    # rebinding or a deletion of a name no call could reach (review/reach.py)
    refs: dict[str, object] = field(default_factory=dict)
    changes: dict[str, NameChange] = field(default_factory=dict)  # the run's changes, by name
    left: dict[str, Fingerprint] = field(default_factory=dict)  # what the run left, by name
    small_bytes: int = 0
    undone: bool = False  # taken off the stack by an undo

    def saved_of(self, name: str) -> Saved | None:
        """How ``name`` was before the run: as saved, or bound to the object first seen."""
        saved = self.saved.get(name)
        if saved is None and name in self.refs:
            ref = self.refs[name]
            saved = Saved(bound=True, ref=ref, before=skipped(ref))
        return saved

    @property
    def copied_bytes(self) -> int:
        return sum(s.size for s in self.saved.values())  # size is 0 without a copy


@dataclass(frozen=True)
class UndoReport:
    label: str = ""
    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()  # created by the run: deleted again
    left_alone: tuple[str, ...] = ()  # changed by the user since the run
    not_restored: tuple[tuple[str, str], ...] = ()  # (name, why)
    nothing: bool = False  # no run to undo

    def text(self) -> str:
        if self.nothing:
            return "Nothing to undo: no agent run changed a variable (or every such run was undone)."
        lines = [f"Undid {self.label}:" if self.label else "Undid the last run:"]
        if self.restored:
            lines.append("restored " + ", ".join(f"`{n}`" for n in self.restored))
        if self.removed:
            lines.append("removed " + ", ".join(f"`{n}`" for n in self.removed) + " (created by the run)")
        if self.left_alone:
            lines.append("left as they are, changed since the run: " + ", ".join(f"`{n}`" for n in self.left_alone))
        for name, why in self.not_restored:
            lines.append(f"not restored: `{name}` ({why})")
        if len(lines) == 1:
            lines.append("no variable needed restoring")
        lines.append("Files, databases and other processes the code touched are not undone.")
        return "\n".join(lines)


class UndoStack:
    """The runs that can be undone, newest last, and the copies they hold."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.runs: list[RunRecord] = []
        self._held = 0  # held_bytes while save() runs (summed once, then kept up to date)

    @property
    def held_bytes(self) -> int:
        return sum(r.copied_bytes for r in self.runs)

    def newest(self) -> RunRecord | None:
        """The run ``undo`` would restore now: the newest that changed a name."""
        return next((r for r in reversed(self.runs) if r.changes), None)

    def start(self, label: str) -> RunRecord:
        record = RunRecord(label)
        self.runs.append(record)
        del self.runs[:-MAX_RUNS]
        return record

    def save(self, record: RunRecord, items: Iterable[tuple[str, object]], copy_names: frozenset[str],
             fingerprints: dict[str, Fingerprint],
             reach: frozenset[str] | None = None) -> list[tuple[str, str]]:
        """Keep each name as it is before its first change in this run: a reference always, a
        copy for ``copy_names`` and small values of known types the call can reach (``reach``,
        None: every name). Returns the (name, why) of names in ``copy_names`` that have no copy."""
        refused: list[tuple[str, str]] = []
        self._held = self.held_bytes
        values = dict(items)
        record.refs = values | record.refs  # a name's first object in the run stays
        names = values if reach is None else [n for n in reach if n in values]
        for name in names:
            value = values[name]
            saved = record.saved.get(name)
            wanted = name in copy_names
            if saved is None:
                if record.refs[name] is value and name not in record.changes:
                    saved = Saved(bound=True, ref=value, before=fingerprints.get(name))
                    self._copy(record, saved, value, wanted)
                else:  # an earlier call of the run, unable to reach it, rebound it
                    saved = Saved(bound=True, ref=record.refs[name], before=skipped(record.refs[name]),
                                  why_not="it was rebound before it was copied")
                record.saved[name] = saved
            elif wanted and not saved.has_copy and name not in record.changes and saved.ref is value:
                self._copy(record, saved, value, wanted)  # still as it was when the run started
            if wanted and not saved.has_copy:
                refused.append((name, saved.why_not))
        return refused

    def _copy(self, record: RunRecord, saved: Saved, value: object, wanted: bool) -> None:
        size = size_of(value)
        if size is None:
            saved.why_not = f"a {type(value).__name__} is not copied"
        elif self.budget <= 0:
            saved.why_not = "copies are off: AgentMagics.undo_budget is 0"
        elif not wanted and (size > SMALL_COPY or record.small_bytes + size > SMALL_TOTAL):
            saved.why_not = "it was not expected to change, so it was not copied"
        elif not self._make_room(size, record):
            saved.why_not = f"{size_text(size)}, over the undo budget of {size_text(self.budget)}"
        else:
            try:
                saved.copy = copy_value(value)
            except (TypeError, MemoryError, RecursionError) as exc:
                saved.why_not = f"it could not be copied: {exc}"[:120]
                return
            saved.size = size
            self._held += size
            saved.why_not = ""
            if not wanted:
                record.small_bytes += size

    def _make_room(self, size: int, current: RunRecord) -> bool:
        if size > self.budget:
            return False
        for old in self.runs:
            if self._held + size <= self.budget:
                break
            if old is current:
                continue
            for saved in old.saved.values():
                if saved.has_copy:
                    saved.copy = _UNSET
                    saved.why_not = "its copy was dropped to make room for a newer run's"
                    self._held -= saved.size
                    saved.size = 0
        return self._held + size <= self.budget

    def undo(self, namespace: MutableMapping[str, Any],
             now: Callable[[object], Fingerprint] = fingerprint) -> UndoReport:
        while self.runs and not self.runs[-1].changes:
            self.runs.pop()  # runs that changed nothing
        if not self.runs:
            return UndoReport(nothing=True)
        record = self.runs.pop()
        record.undone = True
        restored, removed, left_alone, not_restored = [], [], [], []
        for name, change in record.changes.items():
            left = record.left.get(name)
            present = name in namespace
            if left is None:
                still = not present
            else:
                still = present and _unchanged(now(namespace[name]), left)
            if not still:
                left_alone.append(name)
                continue
            saved = record.saved_of(name)
            if saved is None:
                not_restored.append((name, "its earlier value was not kept"))
            elif not saved.bound:
                namespace.pop(name, None)
                removed.append(name)
            elif change.kind == "changed" or not _untouched(saved):
                # the old object was changed: only the copy is the value before the run
                if saved.has_copy:
                    namespace[name] = saved.copy
                    restored.append(name)
                else:
                    not_restored.append((name, f"changed in place, and {saved.why_not}"))
            else:  # rebound or deleted: the old object itself, as it was
                namespace[name] = saved.ref
                restored.append(name)
        for name in restored:
            saved = record.saved_of(name)
            if saved is not None:
                self._hand_back(name, saved, now(namespace[name]))
        return UndoReport(record.label, tuple(restored), tuple(removed), tuple(left_alone), tuple(not_restored))

    def _hand_back(self, name: str, saved: Saved, restored: Fingerprint) -> None:
        """The value put back is what an earlier run left (a copy: another object): that run's
        record learns it, so that it can be undone next."""
        before = saved.before
        for earlier in reversed(self.runs):
            left = earlier.left.get(name)
            if left is None:
                continue
            if before is not None and left.ident == before.ident and left.same_contents(before):
                earlier.left[name] = restored
            return


def _unchanged(now: Fingerprint, left: Fingerprint) -> bool:
    return now.ident == left.ident and (now.opaque or now.same_contents(left))


def _untouched(saved: Saved) -> bool:
    before = saved.before
    if before is None:
        return False
    now = fingerprint(saved.ref)
    # an object of unknown type is restored as the object it was (its contents are not compared)
    return now.ident == before.ident and (before.opaque or now.same_contents(before))


def size_text(size: int) -> str:
    return f"{size / 2**20:,.0f} MB" if size >= 2**20 else f"{size / 1024:,.0f} KB"

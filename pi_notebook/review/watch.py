"""The review of one kernel's namespace across agent runs: the one object the python tool, the
approval card and ``%agent undo`` share.

- ``preview(code, namespace, protect)`` before approval: what the code may do to the user's
  names (``reading.py``), as lines for the card, the protected names it touches, and what an
  undo could not bring back.
- ``before_call`` / ``after_call`` around each python call: fingerprints before and after
  (``changes.py``) of the names the call can reach (``reach.py``; every other name by
  identity), copies for undo (``undo.py``) of the names the code may change in place, of the
  protected names and of small reached values; after the call, a protected name that changed
  although the code was not read to change it is put back.
- ``start_run(label)`` when a run starts; ``undo(namespace)`` restores the newest run's names.

``review_for(owner)`` keeps one review per shell.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from .changes import ChangeReport, NameChange, Snapshot, compare, snapshot
from .fingerprint import fingerprint, known_kind
from .reach import reachable
from .reading import CodeEffects, NameEffect, read_code
from .undo import DEFAULT_BUDGET, RunRecord, Saved, UndoReport, UndoStack, copy_value, size_of, size_text

__all__ = ["CallReport", "CallWatch", "NamespaceReview", "Preview", "review_for"]

_MAX_PREVIEW = 20  # lines about existing names on the approval panel
_VERBS = {"assigns": "assigns", "deletes": "deletes", "changes": "changes", "calls": "calls"}


@dataclass(frozen=True)
class Preview:
    """What the approval card says before the code runs."""

    lines: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()  # protected names the code may change: ask even under auto
    unrestorable: tuple[str, ...] = ()  # lines: what an undo could not bring back


@dataclass
class CallWatch:
    effects: CodeEffects
    before: Snapshot
    record: RunRecord
    protect: frozenset[str]
    guard: dict[str, object] = field(default_factory=dict)  # copies of protected names for this call
    epoch: object = None
    reach: frozenset[str] | None = None  # names whose contents are compared (None: all)


@dataclass(frozen=True)
class CallReport:
    report: ChangeReport
    reverted: tuple[str, ...] = ()  # protected names put back after the call
    unrevertable: tuple[str, ...] = ()  # protected names changed that could not be put back

    def lines(self) -> list[str]:
        lines = self.report.lines()
        if self.reverted:
            names = ", ".join(f"`{n}`" for n in self.reverted)
            lines.append(f"{names} protected (AgentMagics.protect): the change was undone. "
                         "Ask the user before changing it; do not change it another way.")
        if self.unrevertable:
            names = ", ".join(f"`{n}`" for n in self.unrevertable)
            lines.append(f"{names} protected (AgentMagics.protect) and changed, and could not be put "
                         "back (no copy). Tell the user.")
        return lines


class NamespaceReview:
    def __init__(self) -> None:
        self.stack = UndoStack(DEFAULT_BUDGET)
        self.current: RunRecord | None = None
        self.agent_made: set[str] = set()  # names the agent's code created
        self._last: tuple[object, Snapshot] | None = None  # (epoch, the last call's after-snapshot)
        self._runs = 0

    # -- runs --
    def start_run(self, label: str = "") -> RunRecord:
        self._runs += 1
        self.current = self.stack.start(label or f"agent run {self._runs}")
        return self.current

    def _record(self) -> RunRecord:
        if self.current is None:
            self.start_run()
        assert self.current is not None
        return self.current

    # -- before approval --
    def preview(self, code: str, namespace: Mapping[str, Any], protect: Iterable[str] = (),
                budget: int | None = None) -> Preview:
        effects = read_code(code)
        if effects.unreadable:
            return Preview(lines=("The code could not be read for the variables it changes.",))
        by_name: dict[str, list[NameEffect]] = {}
        for effect in effects.effects:
            by_name.setdefault(effect.name, []).append(effect)
        lines: list[str] = []
        new: list[str] = []
        for name, found in by_name.items():
            if name not in namespace:
                new.append(name)
                continue
            origin = "which the agent created" if name in self.agent_made else "which you created"
            parts = []
            for i, effect in enumerate(found[:4]):
                what = f"`{effect.detail}`" if effect.detail and effect.kind != "assigns" else f"`{name}`"
                if i == 0 and what != f"`{name}`":  # "which you created" belongs to the name
                    what += f" {'in' if effect.kind == 'changes' else 'on'} `{name}`"
                parts.append(f"{_VERBS[effect.kind]} {what}" + (f", {origin}" if i == 0 else ""))
            if len(found) > 4:
                parts.append(f"and {len(found) - 4} more")
            lines.append("; ".join(parts))
        if len(lines) > _MAX_PREVIEW:
            lines[_MAX_PREVIEW:] = [f"… and {len(lines) - _MAX_PREVIEW} more of your variables"]
        if new:
            lines.append("creates " + ", ".join(f"`{n}`" for n in new[:8]) + (" …" if len(new) > 8 else ""))
        if effects.dynamic:
            lines.append(f"calls {', '.join(effects.dynamic)}(): it may change names not listed here")
        touched = effects.names
        protected = tuple(n for n in protect if n in touched or (effects.dynamic and n in namespace))
        unrestorable = []
        for name in sorted(effects.changed_in_place):
            if name in namespace:
                why = _why_no_copy(namespace[name], self.stack.budget if budget is None else budget)
                if why:
                    unrestorable.append(f"undo could not restore `{name}`: {why}")
        if effects.outside:
            unrestorable.append("undo cannot take back what the code does outside the kernel: "
                                + ", ".join(f"`{d}`" for d in effects.outside))
        return Preview(tuple(lines), protected, tuple(unrestorable))

    # -- around a call --
    def before_call(self, code: str, items: list[tuple[str, object]], protect: Iterable[str] = (),
                    budget: int = DEFAULT_BUDGET, epoch: object = None) -> CallWatch:
        """``epoch``: a value that changes whenever user code may have run since the last call
        (the shell's execution count); while it is the same and every name is bound to the
        same object, the last call's after-snapshot is this call's before-snapshot."""
        self.stack.budget = budget
        record = self._record()
        effects = read_code(code)
        protected = frozenset(protect)
        reach = reachable(effects, items, protected)
        last = self._last
        before = self._reuse(epoch, items, reach)
        if before is None:
            before = snapshot(items, reach, known=last[1] if last is not None else None)
        wanted = effects.changed_in_place | (protected if effects.dynamic or effects.unreadable else
                                             protected & effects.names)
        self.stack.save(record, items, frozenset(wanted), before, reach)
        guard: dict[str, object] = {}
        for name, value in items:
            if name in protected and name not in effects.names:
                guard[name] = value  # the binding at least; a copy when it fits the budget
                if not _why_no_copy(value, budget):
                    try:
                        guard[name] = copy_value(value)
                    except (TypeError, MemoryError, RecursionError):
                        pass
        return CallWatch(effects, before, record, protected, guard, epoch, reach)

    def after_call(self, watch: CallWatch, namespace: MutableMapping[str, Any],
                   items: list[tuple[str, object]]) -> CallReport:
        after = snapshot(items, watch.reach, watch.before)
        report = compare(watch.before, after, watch.effects)
        reverted, unrevertable = [], []
        kept: list[NameChange] = []
        for change in report.changes:
            name = change.name
            if name in watch.guard or (name in watch.protect and name not in watch.effects.names
                                       and change.kind == "created"):
                if name in watch.guard:
                    old = watch.guard[name]
                    if change.kind == "changed" and old is namespace.get(name):
                        unrevertable.append(name)  # only a reference: the change stays
                        kept.append(change)
                        continue
                    namespace[name] = old
                else:
                    namespace.pop(name, None)
                reverted.append(name)
                continue
            kept.append(change)
        record = watch.record
        for change in kept:
            name = change.name
            if change.kind == "created":
                self.agent_made.add(name)
                if name not in record.saved and name not in record.refs:
                    record.saved[name] = Saved(bound=False)  # not bound when the run began
            first = record.changes.get(name)
            record.changes[name] = first if first is not None and first.kind == "created" else change
            if name in after:
                record.left[name] = after[name]
            else:
                record.left.pop(name, None)
        report = ChangeReport(tuple(kept), report.unsure)
        # what this call left is the next call's "before", unless a name was put back
        self._last = (watch.epoch, after) if watch.epoch is not None and not reverted else None
        return CallReport(report, tuple(reverted), tuple(unrevertable))

    def _reuse(self, epoch: object, items: list[tuple[str, object]],
               reach: frozenset[str] | None) -> Snapshot | None:
        last, self._last = self._last, None
        if last is None or epoch is None or last[0] != epoch:
            return None
        snap = last[1]
        if len(snap) != len(items):
            return None
        for name, value in items:
            fp = snap.get(name)
            if fp is None or fp.ident != id(value):
                return None
            if fp.skipped and (reach is None or name in reach):
                # the last call could not reach it, this one can: its contents now
                snap[name] = fingerprint(value)
        return snap

    def undo(self, namespace: MutableMapping[str, Any]) -> UndoReport:
        self._last = None
        if self.current is not None and self.stack.runs and self.stack.runs[-1] is self.current:
            self.current = None  # the next call starts a new record
        return self.stack.undo(namespace)


def _why_no_copy(value: object, budget: int) -> str:
    if known_kind(value) is None:
        return f"a {type(value).__name__} is not copied"
    size = size_of(value)
    if size is None:
        return "it holds objects that are not copied"
    if budget <= 0:
        return "copies are off (AgentMagics.undo_budget = 0)"
    if size > budget:
        return f"{size_text(size)} is over the undo budget of {size_text(budget)}"
    return ""


_reviews: weakref.WeakKeyDictionary[Any, NamespaceReview] = weakref.WeakKeyDictionary()


def review_for(owner: object) -> NamespaceReview:
    """The review of ``owner``'s namespace (one per shell)."""
    review = _reviews.get(owner)
    if review is None:
        review = NamespaceReview()
        _reviews[owner] = review
    return review

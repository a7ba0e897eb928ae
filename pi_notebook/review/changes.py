"""What one call of agent code did to the namespace: fingerprints before and after, compared.

``snapshot(items, reach) -> Snapshot`` fingerprints each ``(name, value)`` the call can reach
(``fingerprint.py``: bounded, no user code) and keeps the identity of the others.
``compare(before, after, effects) -> ChangeReport``: the names created, rebound (a different
object), deleted, or changed in place (the same object, other contents), each as one line
without any value in it (kinds, shapes, lengths, column names, dtypes); and the names the code
was read to change in place (``reading.py``) whose change could have been missed: sampled
contents, or an object whose contents are not compared.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from .fingerprint import Fingerprint, fingerprint, identity, sized_length, skipped
from .reading import CodeEffects

__all__ = ["ChangeKind", "ChangeReport", "NameChange", "Snapshot", "compare", "describe", "snapshot",
           "visible_items"]

ChangeKind = Literal["created", "rebound", "deleted", "changed"]
Snapshot = dict[str, Fingerprint]

_MAX_LISTED = 5  # column names listed per line
MAX_LINES = 40  # lines of one report (code that makes 10,000 names gets a count)
MAX_COMPARED = 5000  # names compared by contents; further names by identity only
_INTERNAL = frozenset({"In", "Out", "exit", "quit", "get_ipython"})  # IPython's own names


@dataclass(frozen=True)
class NameChange:
    name: str
    kind: ChangeKind
    summary: str  # one line, e.g. "`df` changed in place: columns added 'z'; shape 3×2 → 3×3"


@dataclass(frozen=True)
class ChangeReport:
    changes: tuple[NameChange, ...] = ()
    unsure: tuple[str, ...] = ()  # lines: changes that could have been missed, and why

    def lines(self, limit: int = MAX_LINES) -> list[str]:
        lines = [c.summary for c in self.changes[:limit]]
        rest = self.changes[limit:]
        if rest:
            counts: dict[str, int] = {}
            for change in rest:
                counts[change.kind] = counts.get(change.kind, 0) + 1
            lines.append(f"… and {len(rest):,} more names: "
                         + ", ".join(f"{n:,} {kind}" for kind, n in counts.items()))
        return lines + list(self.unsure[:limit])

    @property
    def names(self) -> frozenset[str]:
        return frozenset(c.name for c in self.changes)


def snapshot(items: Iterable[tuple[str, object]], reach: Collection[str] | None = None,
             before: Snapshot | None = None, known: Snapshot | None = None) -> Snapshot:
    """Fingerprints by name: the first ``MAX_COMPARED`` names by contents, any further ones by
    identity (a namespace of 100,000 names costs its count, not its data).

    ``reach``: the names a call can change in place (``reach.py``; None: every name). Any other
    name keeps its identity only (``skipped``), unless ``before`` (the snapshot before the
    call) has it unbound or bound to another object: a new or rebound value is described.
    An unreached name's fingerprint in ``before`` (or its identity in ``known``, an older
    snapshot) is used again, not made anew."""
    snap: Snapshot = {}
    known = before if known is None else known
    for i, (name, value) in enumerate(items):
        if i >= MAX_COMPARED:
            snap[name] = identity(value)
        elif reach is None or name in reach:
            snap[name] = fingerprint(value)
        else:
            old = before.get(name) if before is not None else None
            if before is not None and (old is None or old.ident != id(value)):
                snap[name] = fingerprint(value)  # new or rebound
                continue
            # the same object, not reachable by the call: what was known of it stands (its
            # contents when ``before`` had them, so that they compare equal)
            seen = known.get(name) if known is not None else None
            if (seen is not None and seen.ident == id(value) and seen.kind == type(value).__name__
                    and (known is before or (seen.skipped and seen.length == sized_length(value)))):
                snap[name] = seen
            else:
                snap[name] = skipped(value)
    return snap


def describe(fp: Fingerprint) -> str:
    """A value's kind and size in a few words, nothing of its contents."""
    if fp.kind == "DataFrame" and fp.shape is not None:
        return f"DataFrame {fp.shape[0]:,}×{fp.shape[1]:,}"
    if fp.kind == "ndarray" and fp.shape is not None:
        dims = "×".join(f"{n:,}" for n in fp.shape) or "scalar"
        return f"ndarray {dims} {fp.dtypes[0] if fp.dtypes else ''}".rstrip()
    if fp.kind in ("Series", "Index", "RangeIndex") and fp.length is not None:
        return f"{fp.kind} of {fp.length:,} ({fp.dtypes[0] if fp.dtypes else ''})"
    if fp.kind in ("str", "bytes") and fp.length is not None:
        return f"{fp.kind} of {fp.length:,} {'characters' if fp.kind == 'str' else 'bytes'}"
    if fp.length is not None:
        return f"{fp.kind} of {fp.length:,}"
    return fp.kind


def compare(before: Snapshot, after: Snapshot, effects: CodeEffects | None = None) -> ChangeReport:
    changes: list[NameChange] = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            changes.append(NameChange(name, "deleted", f"`{name}` deleted (was {describe(old)})"))
        elif new.ident != old.ident:
            if new.kind == old.kind and new.same_contents(old) and not new.opaque:
                continue  # rebound to an equal value (x = x.copy()): nothing the user would see
            was, now = describe(old), describe(new)
            # "list of 2 → list of 2" alone would read as no change: its value differs
            other = " (another value)" if was == now and not (new.opaque or old.opaque) else ""
            changes.append(NameChange(name, "rebound", f"`{name}` rebound: {was} → {now}{other}"))
        elif not old.opaque and not new.same_contents(old):
            changes.append(NameChange(name, "changed", f"`{name}` changed in place: {_difference(old, new)}"))
    for name, new in after.items():
        if name not in before:
            changes.append(NameChange(name, "created", f"`{name}` created: {describe(new)}"))
    unsure = _unsure(before, after, effects, {c.name for c in changes})
    if len(after) > MAX_COMPARED:
        unsure += (f"only the first {MAX_COMPARED:,} of {len(after):,} names were compared by contents; "
                   "the others by identity (a change inside them is not seen)",)
    return ChangeReport(tuple(changes), unsure)


def _unsure(before: Snapshot, after: Snapshot, effects: CodeEffects | None,
            changed: set[str]) -> tuple[str, ...]:
    if effects is None:
        return ()
    lines = []
    for name in sorted(effects.changed_in_place - changed):
        fp = after.get(name)
        if fp is None or name not in before:
            continue
        detail = ", ".join(e.detail for e in effects.of(name) if e.detail)[:120]
        if fp.opaque:
            lines.append(f"`{name}` may have changed ({detail}): its contents are not compared "
                         f"(a {fp.kind})")
        elif fp.sampled:
            lines.append(f"`{name}` looks unchanged ({detail}), but only a sample of it was compared: "
                         "a change elsewhere could be missed")
    return tuple(lines)


def _difference(old: Fingerprint, new: Fingerprint) -> str:
    parts: list[str] = []
    if old.shape != new.shape and old.shape is not None and new.shape is not None:
        parts.append(f"shape {'×'.join(map(str, old.shape))} → {'×'.join(map(str, new.shape))}")
    elif old.length != new.length and old.length is not None and new.length is not None:
        parts.append(f"length {old.length:,} → {new.length:,}")
    if old.columns is not None and new.columns is not None and old.columns != new.columns:
        added = [c for c in new.columns if c not in old.columns]
        removed = [c for c in old.columns if c not in new.columns]
        if added:
            parts.append(f"columns added {_names(added)}")
        if removed:
            parts.append(f"columns removed {_names(removed)}")
        if not added and not removed:
            parts.append("columns reordered")
    if old.dtypes is not None and new.dtypes is not None and old.dtypes != new.dtypes:
        if old.columns is not None and new.columns is not None:
            was = dict(zip(old.columns, old.dtypes, strict=False))
            retyped = [f"'{c}' {was[c]} → {t}" for c, t in zip(new.columns, new.dtypes, strict=False)
                       if c in was and was[c] != t]
            if retyped:
                parts.append("dtype " + ", ".join(retyped[:_MAX_LISTED])
                             + (f" and {len(retyped) - _MAX_LISTED} more" if len(retyped) > _MAX_LISTED else ""))
        else:
            parts.append(f"dtype {old.dtypes[0]} → {new.dtypes[0]}")
    if not parts:
        parts.append("values changed")
    return f"{describe(new)}, " + "; ".join(parts)


def _names(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


def visible_items(namespace: Mapping[str, object], hidden: Mapping[str, object]) -> list[tuple[str, object]]:
    """The user's names: not ``_private``, not IPython's own (``In``, ``Out``...), not what the
    shell hides (``user_ns_hidden``) while it still holds the hidden value."""
    return [(name, value) for name, value in list(namespace.items())
            if not (name[:1] == "_" or name in _INTERNAL or (name in hidden and hidden[name] is value))]

"""A bounded fingerprint of one value: enough to tell whether it changed, never its text.

``fingerprint(value) -> Fingerprint``. Only known types are looked into, by exact type check
(``type(v) is list``), so no code of the user's classes runs (no ``__eq__``, ``__len__``,
``__hash__``, ``__getattr__``): the built-in scalars, str/bytes, tuple, list, dict, set,
frozenset, numpy arrays, pandas DataFrame, Series and Index (numpy and pandas only when
already imported). Anything else is fingerprinted by identity: a rebinding is seen, a change
inside it is not (``Fingerprint.opaque``).

The work is bounded whatever the size: a container longer than ``SAMPLE`` is sampled (its
head, its tail and strided items), an array or a frame column by a fixed number of elements,
nested containers to ``DEPTH`` levels; such a fingerprint is ``sampled``, and a change in the
parts not looked at can be missed (the summaries say so). Values are hashed, never kept or
shown: a fingerprint holds a digest, a length, a shape, column names and dtypes.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["DEPTH", "SAMPLE", "Fingerprint", "fingerprint", "identity", "known_kind", "skipped"]

SAMPLE = 256  # items of a container looked at (head, tail, strided middle)
ARRAY_SAMPLE = 4096  # elements of an array, rows of a frame
MAX_COLUMNS = 256  # frame columns hashed (the column names are always compared, up to this many)
DEPTH = 3  # nesting levels looked into
_TEXT_CHARS = 64 * 1024  # a str/bytes longer than this is sampled

_SCALARS = (int, float, complex, bool, type(None), str, bytes)
_NUMBERS = frozenset({float, bool, type(None)})  # reprs of bounded size (an int may be huge)
_BIG = 2**62
_SIZED = frozenset({list, tuple, dict, set, frozenset, str, bytes})


@dataclass(frozen=True)
class Fingerprint:
    """What is kept of a value to compare it later."""

    kind: str  # "list", "DataFrame", ... or the type name of an opaque value
    ident: int  # id() of the object
    digest: str = ""  # hash of the (sampled) contents; "" for opaque values
    length: int | None = None
    shape: tuple[int, ...] | None = None
    columns: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    sampled: bool = False  # only part of the contents was hashed
    opaque: bool = False  # an unknown type: identity only
    skipped: bool = False  # not looked into: the call could not reach it (review/reach.py)

    def same_contents(self, other: Fingerprint) -> bool:
        return (self.digest, self.length, self.shape, self.columns, self.dtypes) == (
            other.digest, other.length, other.shape, other.columns, other.dtypes)


def known_kind(value: object) -> str | None:
    """The kind name of a value fingerprint() looks into, None for an opaque one."""
    cls = type(value)
    if cls in _SCALARS:
        return cls.__name__
    if cls in (tuple, list, dict, set, frozenset):
        return cls.__name__
    np = sys.modules.get("numpy")
    if np is not None and cls is np.ndarray:
        return "ndarray"
    pd = sys.modules.get("pandas")
    if pd is not None and cls in (pd.DataFrame, pd.Series, pd.Index, pd.RangeIndex):
        return cls.__name__
    return None


def identity(value: object) -> Fingerprint:
    """A fingerprint of the object only: a rebinding is seen, a change inside it is not."""
    return Fingerprint(kind=type(value).__name__, ident=id(value), opaque=True)


def skipped(value: object) -> Fingerprint:
    """The identity of a value whose contents were not looked at (a call could not reach it),
    and the length of a built-in container or text (its describe() says "list of 3")."""
    return Fingerprint(kind=type(value).__name__, ident=id(value), length=sized_length(value), opaque=True,
                       skipped=True)


def sized_length(value: object) -> int | None:
    """``len()`` of a built-in container or text by exact type (no user ``__len__``), else None."""
    return len(value) if type(value) in _SIZED else None  # type: ignore[arg-type]  # a built-in sized type


def fingerprint(value: Any) -> Fingerprint:
    h = hashlib.blake2b(digest_size=16)
    state = _State(h)
    kind = known_kind(value)
    if kind is None:
        return identity(value)
    if kind == "DataFrame":
        return _frame(value, state)
    if kind in ("Series", "Index", "RangeIndex"):
        length = _feed_column(value, state)
        dtype = _dtype_name(value.dtype)
        return Fingerprint(kind=kind, ident=id(value), digest=h.hexdigest(), length=length,
                           dtypes=(dtype,), sampled=state.sampled)
    if kind == "ndarray":
        shape = tuple(int(n) for n in value.shape)
        _feed_array(value, state)
        return Fingerprint(kind=kind, ident=id(value), digest=h.hexdigest(), shape=shape,
                           dtypes=(_dtype_name(value.dtype),), sampled=state.sampled)
    _feed(value, state, DEPTH)
    size: int | None = len(value) if kind in ("tuple", "list", "dict", "set", "frozenset", "str", "bytes") else None
    return Fingerprint(kind=kind, ident=id(value), digest=h.hexdigest(), length=size, sampled=state.sampled)


class _State:
    def __init__(self, h: Any) -> None:
        self.h = h
        self.sampled = False

    def put(self, text: str | bytes) -> None:
        self.h.update(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
        self.h.update(b"\x1f")


def _indices(n: int, limit: int) -> tuple[list[int], bool]:
    """All positions of a sequence of ``n``, or head, tail and a strided middle (sampled)."""
    if n <= limit:
        return list(range(n)), False
    edge = limit // 4
    middle = limit - 2 * edge
    step = max(1, (n - 2 * edge) // middle)
    picked = list(range(edge)) + list(range(edge, n - edge, step))[:middle] + list(range(n - edge, n))
    return picked, True


def _feed(value: Any, state: _State, depth: int) -> None:
    cls = type(value)
    state.put(cls.__name__)
    if cls in _SCALARS:
        _feed_scalar(value, state)
        return
    kind = known_kind(value)
    if kind is None or depth <= 0:
        state.put(str(id(value)))  # opaque or too deep: its identity
        return
    if kind in ("ndarray", "DataFrame", "Series", "Index", "RangeIndex"):
        inner = fingerprint(value)  # bounded on its own
        state.sampled = state.sampled or inner.sampled
        state.put(f"{inner.digest}{inner.shape}{inner.columns}{inner.dtypes}{inner.length}")
        return
    if cls in (list, tuple):
        seq: Any = value
        if len(seq) <= SAMPLE and all(type(x) in _NUMBERS or (type(x) is int and -_BIG < x < _BIG) for x in seq):
            state.put(repr(seq))  # numbers only: the built-in repr, one call
            return
        positions, sampled = _indices(len(seq), SAMPLE)
        state.sampled = state.sampled or sampled
        state.put(str(len(seq)))
        for i in positions:
            state.put(str(i))
            _feed(seq[i], state, depth - 1)
        return
    if cls is dict:
        mapping: Any = value
        state.put(str(len(mapping)))
        items = list(mapping.items()) if len(mapping) <= SAMPLE else _dict_sample(mapping, state)
        for key, item in items:
            _feed(key, state, 1)
            _feed(item, state, depth - 1)
        return
    # set / frozenset: no order to sample by; exact-type elements are hashed order-free
    members: Any = value
    state.put(str(len(members)))
    if len(members) > SAMPLE * 4:
        state.sampled = True  # a large set: its size and identity-free members are not all read
        return
    digests = sorted(_member_digest(m) for m in members)
    state.put("".join(digests))


def _feed_scalar(value: Any, state: _State) -> None:
    cls = type(value)
    if cls is str or cls is bytes:
        n = len(value)
        state.put(str(n))
        if n <= _TEXT_CHARS:
            state.put(value)
            return
        state.sampled = True  # a long text: its length, its ends and strided pieces
        piece = _TEXT_CHARS // 16
        step = max(piece, (n - 2 * piece) // 14)
        for start in [*list(range(0, n - piece, step))[:15], n - piece]:
            state.put(value[start:start + piece])
        return
    if cls is int and value.bit_length() > 4096:
        state.put(f"{value.bit_length()}:{hash(value)}")  # no decimal conversion of a huge int
        return
    state.put(repr(value))


def _dict_sample(mapping: Any, state: _State) -> list[tuple[Any, Any]]:
    state.sampled = True
    n = len(mapping)
    edge = SAMPLE // 2
    items = []
    for i, pair in enumerate(mapping.items()):  # insertion order: the first keys
        if i >= edge:
            break
        items.append(pair)
    keys = list(mapping)  # key references only: O(n) pointers, no user code for exact types
    items += [(k, mapping[k]) for k in keys[max(edge, n - edge):]]
    return items


def _member_digest(member: object) -> str:
    inner = _State(hashlib.blake2b(digest_size=8))
    _feed(member, inner, 1)
    return str(inner.h.hexdigest())


def _feed_array(arr: Any, state: _State, exact: bool = False) -> None:
    """``exact``: the elements given are all that is to be hashed (already sampled)."""
    np = sys.modules["numpy"]
    state.put(f"{arr.shape}{arr.dtype.str}")  # .str: "<f8", an attribute (str() is slow)
    size = int(arr.size)
    if size == 0:
        return
    if arr.dtype == object:
        positions, sampled = _indices(size, SAMPLE)
        state.sampled = state.sampled or sampled
        flat = arr.reshape(-1) if arr.flags.c_contiguous else None
        for i in positions:
            element = flat[i] if flat is not None else arr.flat[i]
            _feed(element, state, 1)
        return
    if size <= ARRAY_SAMPLE or exact:
        state.put(np.ascontiguousarray(arr).tobytes())
        return
    state.sampled = True
    positions, _ = _indices(size, ARRAY_SAMPLE)
    state.put(np.take(arr, positions).tobytes())  # flat positions: a copy of the sample only


def _feed_column(column: Any, state: _State) -> int:
    """A Series or Index: its length, dtype and (sampled) values."""
    np, pd = sys.modules["numpy"], sys.modules["pandas"]
    n = len(column)
    dtype = column.dtype
    state.put(f"{n}{_dtype_name(dtype)}")
    if type(column.name) in _SCALARS:
        state.put(repr(column.name))
    if n == 0:
        return n
    positions, sampled = _indices(n, ARRAY_SAMPLE)
    state.sampled = state.sampled or sampled
    part = column.take(positions) if sampled else column
    if isinstance(dtype, np.dtype):  # numpy's own dtype classes (Float64DType, ObjectDType...)
        # numbers and dates: their bytes; object columns: the objects themselves (_feed)
        _feed_array(part.to_numpy(), state, exact=True)
    elif type(dtype) is pd.CategoricalDtype:
        codes = part.codes if hasattr(part, "codes") else part.cat.codes
        _feed_array(np.asarray(codes), state, exact=True)
        _feed_column(dtype.categories, state)
    elif type(dtype).__module__.split(".")[0] == "pandas":
        # pandas' own extension types (strings, nullable numbers, zoned dates): its hashing of
        # its own values, whose elements are not the user's objects
        _feed_array(pd.util.hash_pandas_object(part, index=False).to_numpy(), state, exact=True)
    else:
        state.put(str(id(column)))  # a third-party extension type: identity only
    return n


def _frame(df: Any, state: _State) -> Fingerprint:
    shape = (int(df.shape[0]), int(df.shape[1]))
    # one Series per column, by position: no df.dtypes / df.iloc (each builds a new object)
    cols = list(itertools.islice(df.items(), MAX_COLUMNS))
    columns = tuple(_label(label) for label, _ in cols)
    dtypes = tuple(_dtype_name(column.dtype) for _, column in cols)
    state.put(f"{shape}{columns}{dtypes}")
    state.sampled = shape[1] > MAX_COLUMNS
    _feed_column(df.index, state)
    for _, column in cols:
        _feed_column(column, state)
    return Fingerprint(kind="DataFrame", ident=id(df), digest=state.h.hexdigest(), shape=shape,
                       columns=columns, dtypes=dtypes, sampled=state.sampled)


_dtype_names: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """``str(dtype)``, remembered for numpy's dtypes (a few dozen exist; str() builds the name
    anew each time, the larger part of fingerprinting a small frame)."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(dtype, np.dtype):
        return str(dtype)
    name = _dtype_names.get(dtype)
    if name is None:
        name = str(dtype)
        if len(_dtype_names) < 512:
            _dtype_names[dtype] = name
    return name


def _label(column: Any) -> str:
    if type(column) in _SCALARS:
        return str(column)
    if type(column) is tuple:
        return "/".join(_label(part) for part in column)
    return f"<{type(column).__name__}>"

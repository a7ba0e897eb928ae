"""The per-delta fast paths: the one place that writes pydantic internals directly.

A streamed answer makes a few pydantic objects per token: the provider's ``*_delta`` event,
the loop's shallow copy of the partial message and its ``message_update`` event. Building
them through ``__init__`` / ``model_copy()`` re-validates or copies generically; the helpers
here fill the four slots of a pydantic instance (``__dict__``, ``__pydantic_fields_set__``,
``__pydantic_extra__``, ``__pydantic_private__``) directly. They write through the slot
descriptors of ``BaseModel`` rather than ``object.__setattr__``, which re-checks the MRO on
every call (because BaseModel defines ``__setattr__``) and costs about twice as much.

Providers and the agent loop call these functions and never touch the slots themselves.
tests/perf/ checks that the results are indistinguishable from the validated objects;
bench/stream_overhead.py and bench/loop_overhead.py measure what they save.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = [
    "SET_MODEL_DICT", "SET_FIELDS_SET", "SET_EXTRA", "SET_PRIVATE", "new_instance",
    "fast_shallow_copy", "construct_unchecked", "construct_with_copy", "delta_event",
    "append_delta", "append_text",
]

M = TypeVar("M", bound=BaseModel)

_BASE_SLOTS = BaseModel.__dict__
SET_MODEL_DICT = _BASE_SLOTS["__dict__"].__set__
"""``SET_MODEL_DICT(instance, values)``: set the field values of a pydantic instance."""
SET_FIELDS_SET = _BASE_SLOTS["__pydantic_fields_set__"].__set__
SET_EXTRA = _BASE_SLOTS["__pydantic_extra__"].__set__
SET_PRIVATE = _BASE_SLOTS["__pydantic_private__"].__set__
new_instance = object.__new__
"""``new_instance(cls)``: an empty instance whose four slots must then be set."""


def fast_shallow_copy(model: M) -> M:
    """``model.model_copy()`` (a shallow copy, pi's ``{...partial}``) at about a third of its cost.

    Same result as pydantic's ``__copy__``: a new instance of the same class whose ``__dict__``,
    ``__pydantic_extra__`` and ``__pydantic_fields_set__`` are shallow copies (field values are
    shared) and whose private attributes are copied without the unset ones.
    """
    new = new_instance(type(model))
    SET_MODEL_DICT(new, model.__dict__.copy())
    SET_FIELDS_SET(new, set(model.__pydantic_fields_set__))
    extra = model.__pydantic_extra__
    SET_EXTRA(new, None if extra is None else extra.copy())
    try:
        private = model.__pydantic_private__
    except AttributeError:  # never set (pydantic's own __copy__ allows for it too)
        private = None
    SET_PRIVATE(new, None if private is None else
                {k: v for k, v in private.items() if v is not PydanticUndefined})
    return new


def construct_unchecked(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """An instance of ``cls`` with these field values, without validation.

    ``values`` must hold every field (defaults included) and is used as the instance's
    ``__dict__``; ``fields_set`` is what ``model_fields_set`` reports (the fields given
    explicitly, as with the validating constructor). Only for classes without private
    attributes or extra fields (all of ai.types' and agent.types' events).
    """
    new = new_instance(cls)
    SET_MODEL_DICT(new, values)
    SET_FIELDS_SET(new, fields_set)
    SET_EXTRA(new, None)
    SET_PRIVATE(new, None)
    return new


def construct_with_copy(cls: type[M], values: dict[str, Any], fields_set: set[str], field: str) -> M:
    """``construct_unchecked(cls, values, fields_set)`` with ``values[field]`` replaced by pi's
    ``{...value}``: an event that carries a snapshot of a live message (the agent loop's
    ``message_update``), in one call per delta.

    A pydantic message gets ``fast_shallow_copy`` (inlined here), a dict a ``dict`` copy;
    anything else is kept as is.
    """
    message = values[field]
    kind = type(message)
    # isinstance() against pydantic's ABC metaclass is slow: remember the model classes seen
    is_model = kind in _MODEL_CLASSES
    if not is_model and issubclass(kind, BaseModel):
        _MODEL_CLASSES.add(kind)
        is_model = True
    if is_model:
        copy = new_instance(kind)
        SET_MODEL_DICT(copy, message.__dict__.copy())
        SET_FIELDS_SET(copy, set(message.__pydantic_fields_set__))
        extra = message.__pydantic_extra__
        SET_EXTRA(copy, None if extra is None else extra.copy())
        try:
            private = message.__pydantic_private__
        except AttributeError:  # never set (as in fast_shallow_copy)
            private = None
        SET_PRIVATE(copy, None if private is None else
                    {k: v for k, v in private.items() if v is not PydanticUndefined})
        values[field] = copy
    elif isinstance(message, dict):
        values[field] = dict(message)
    new = new_instance(cls)
    SET_MODEL_DICT(new, values)
    SET_FIELDS_SET(new, fields_set)
    SET_EXTRA(new, None)
    SET_PRIVATE(new, None)
    return new


_MODEL_CLASSES: set[type] = set()


def delta_event(cls: type[M], kind: str, index: int, delta: str, partial: Any) -> M:
    """A ``*_delta`` event (``TextDeltaEvent``, ``ThinkingDeltaEvent``, ``ToolCallDeltaEvent``)
    from values the provider just produced: ``construct_unchecked`` for its four fields."""
    new = new_instance(cls)
    SET_MODEL_DICT(new, {"type": kind, "content_index": index, "delta": delta, "partial": partial})
    SET_FIELDS_SET(new, {"content_index", "delta", "partial"})
    SET_EXTRA(new, None)
    SET_PRIVATE(new, None)
    return new


def append_delta(block: BaseModel, field: str, delta: str, cls: type[M], kind: str, index: int,
                 partial: Any) -> M:
    """``append_text(block, field, delta)`` and the ``delta_event`` that reports it, in one
    call: the per-token work of a streamed text or thinking block."""
    d = block.__dict__
    text = d[field] or ""
    d[field] = ""
    text += delta
    d[field] = text
    new = new_instance(cls)
    SET_MODEL_DICT(new, {"type": kind, "content_index": index, "delta": delta, "partial": partial})
    SET_FIELDS_SET(new, {"content_index", "delta", "partial"})
    SET_EXTRA(new, None)
    SET_PRIVATE(new, None)
    return new


def append_text(block: BaseModel, field: str, delta: str) -> None:
    """``block.<field> += delta`` in amortised O(len(delta)).

    Dropping the block's own reference first leaves the string with a single owner, so
    CPython can grow it in place instead of copying the whole text per delta (a long answer
    stays O(delta) per token, not O(text)). The field is a plain ``str`` field, so skipping
    ``__setattr__`` skips nothing but the copy.
    """
    d = block.__dict__
    text = d[field] or ""
    d[field] = ""
    text += delta
    d[field] = text

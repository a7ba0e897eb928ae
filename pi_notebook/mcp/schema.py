"""MCP tool names and input schemas made acceptable to every wire API.

Names: ``server__tool``, reduced to ``[A-Za-z0-9_-]`` and 64 characters (the tightest limit
among the providers); a name taken already (by a notebook tool or another server's tool)
gets ``_2``, ``_3``... and a notice says so.

Schemas: local ``$ref``s are inlined (Gemini's function declarations and several
OpenAI-compatible servers reject references), ``$schema``/``$id``/``$comment`` dropped, the
root made an ``object`` with ``properties``. A schema that is recursive, not JSON Schema,
not an object at its root, or too large for a tool list is not sent: the tool is skipped
with a notice rather than failing every request of the run.

Inlining is bounded as it goes, before any validation: a few ``$defs`` that each refer twice
to the next expand to 2**n nodes from a 1 KB schema, so the expansion stops at
``MAX_SCHEMA_NODES`` nodes or ``MAX_SCHEMA_DEPTH`` levels and the schema is refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["tool_name", "unique_name", "simplify_schema", "load_schema_checker", "SchemaRejected", "MAX_NAME", "MAX_SCHEMA_CHARS",
           "MAX_SCHEMA_NODES", "MAX_SCHEMA_DEPTH"]

MAX_NAME = 64
MAX_SCHEMA_CHARS = 16_000
# a schema within MAX_SCHEMA_CHARS has far fewer nodes than this (each costs a few characters)
MAX_SCHEMA_NODES = 4_000
MAX_SCHEMA_DEPTH = 100
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_DROP = ("$schema", "$id", "$comment", "$defs", "definitions")


class SchemaRejected(ValueError):
    """The input schema cannot be offered to a model (reason in the message)."""


def tool_name(server: str, tool: str) -> str:
    name = f"{server}__{_BAD.sub('_', tool)}"
    return name[:MAX_NAME]


def unique_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for i in range(2, 1000):
        suffix = f"_{i}"
        candidate = name[:MAX_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    raise SchemaRejected("no free tool name")


def load_schema_checker() -> None:
    """Import the schema checker. Its first import builds URI grammars (seconds of pure
    Python), so the manager calls this in a worker thread before the first tool list."""
    try:
        import jsonschema.validators  # noqa: F401  # imported for its side effect: loaded once
    except ImportError:
        pass


def simplify_schema(schema: Any) -> dict[str, Any]:
    """An input schema every provider accepts (module docstring); raises SchemaRejected."""
    if schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise SchemaRejected("the input schema is not a JSON object")
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    out = _Inliner(defs).inline(schema, (), 0)
    if not isinstance(out, dict):
        raise SchemaRejected("the input schema is not a JSON object")
    root_type = out.get("type", "object")
    if root_type != "object" and not (isinstance(root_type, list) and "object" in root_type):
        raise SchemaRejected(f"the input schema's root is {root_type!r}, not an object")
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    if "required" in out and not (isinstance(out["required"], list)
                                  and all(isinstance(r, str) for r in out["required"])):
        del out["required"]
    try:
        from jsonschema.validators import validator_for

        validator_for(out).check_schema(out)
    except ImportError:
        pass
    except Exception as exc:  # jsonschema.SchemaError and friends
        message = str(getattr(exc, "message", exc)).splitlines()[0][:200]
        raise SchemaRejected(f"the input schema is not valid JSON Schema ({message})") from None
    if len(json.dumps(out, default=str)) > MAX_SCHEMA_CHARS:
        raise SchemaRejected(f"the input schema is larger than {MAX_SCHEMA_CHARS} characters")
    return out


class _Inliner:
    """Inlines local ``$ref``s, counting every node it builds (module docstring)."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.nodes = 0

    def _count(self, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_SCHEMA_NODES:
            raise SchemaRejected(f"the input schema expands to more than {MAX_SCHEMA_NODES} nodes "
                                 "once its $refs are inlined")
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaRejected(f"the input schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")

    def inline(self, node: Any, seen: tuple[str, ...], depth: int) -> Any:
        self._count(depth)
        if isinstance(node, list):
            return [self.inline(item, seen, depth + 1) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            match = re.fullmatch(r"#/(?:\$defs|definitions)/(.+)", ref)
            if match is None or match.group(1) not in self.defs:
                raise SchemaRejected(f"the input schema refers to {ref!r}, which cannot be inlined")
            key = match.group(1)
            if key in seen:
                raise SchemaRejected(f"the input schema is recursive ({key})")
            target = self.inline(self.defs[key], (*seen, key), depth + 1)
            rest = self._keywords({k: v for k, v in node.items() if k != "$ref"}, seen, depth)
            return {**target, **rest} if isinstance(target, dict) else target
        return self._keywords(node, seen, depth)

    def _keywords(self, node: dict[str, Any], seen: tuple[str, ...], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP:
                continue
            if key in ("properties", "patternProperties") and isinstance(value, dict):
                # a map of names to schemas: the names are data (a property may be called "$id")
                out[key] = {name: self.inline(sub, seen, depth + 1) for name, sub in value.items()}
            else:
                out[key] = self.inline(value, seen, depth + 1)
        return out

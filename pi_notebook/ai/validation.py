"""Tool-argument validation (spec 5.12, pi ``utils/validation.ts``).

``validate_tool_arguments`` deep-clones the model's arguments, deletes ``null`` values of
optional properties that do not accept null, applies the AJV-style coercion pass pi uses
for plain JSON-Schema parameters, validates (jsonschema, Draft 2020-12 unless the schema
says otherwise) and either returns the coerced clone or raises with pi's message::

    Validation failed for tool "<name>":
      - <dotted.path or root>: <message>

    Received arguments:
    <the original arguments as 2-space JSON>

Messages follow TypeBox's English texts (``must be number``, ``must have required
properties a, b`` ...), which is what pi shows the model.

Sub-schemas (union arms, optional-null checks) are compiled with the root's ``$defs`` so
that ``#/$defs/...`` references inside them resolve. One thing pi does not have: a tool
whose parameters come from a pydantic model (``tool.parameters_model``) is validated by
that model after the null and coercion passes, and receives the model instance.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from collections import OrderedDict
from typing import Any

from .types import get_field

__all__ = ["validate_tool_call", "validate_tool_arguments", "ToolNotFoundError",
           "ToolArgumentsError", "coerce_with_json_schema", "normalize_optional_nulls"]


class ToolNotFoundError(LookupError):
    """``Tool "<name>" not found`` (pi's text; the agent loop has its own, unquoted one)."""


class ToolArgumentsError(ValueError):
    """The arguments do not match the tool's schema; ``str()`` is pi's full message."""


# --- small JS-compatible helpers ---------------------------------------------------------

_UNCHANGED = object()
_JS_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
            "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_RADIX = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _js_number(text: str) -> int | float | None:
    """``Number(text)`` for a non-blank string; ``None`` for NaN (never raises)."""
    t = text.strip(_JS_SPACE)
    if _INTEGER_TEXT.fullmatch(t):
        return int(t)
    if _DECIMAL.fullmatch(t):
        return float(t)
    if t[:2] in _RADIX and len(t) > 2:
        try:
            return int(t[2:], _RADIX[t[:2]])
        except ValueError:
            return None
    if t in ("Infinity", "+Infinity"):
        return math.inf
    if t == "-Infinity":
        return -math.inf
    return None


def _js_string(value: Any) -> str:
    """``String(x)`` for a number or boolean."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:  # 1e-07 -> 1e-7, 1e+21 stays
        mantissa, exponent = text.split("e")
        sign = exponent[0] if exponent[0] in "+-" else "+"
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text


def _matches_json_type(value: Any, type_name: str) -> bool:
    if type_name == "number":
        return _is_number(value)
    if type_name == "integer":
        return _is_number(value) and (isinstance(value, int) or (math.isfinite(value) and value.is_integer()))
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "null":
        return value is None
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "object":
        return isinstance(value, dict)
    return False


def _coerce_primitive(value: Any, type_name: str) -> Any:
    """One AJV coercion rule; ``_UNCHANGED`` when no rule applies."""
    if type_name in ("number", "integer"):
        if value is None:
            return 0
        if isinstance(value, bool):
            return 1 if value else 0
        if isinstance(value, str) and value.strip(_JS_SPACE) != "":
            parsed = _js_number(value)
            if parsed is not None and math.isfinite(parsed):
                if type_name == "number":
                    return parsed
                if isinstance(parsed, int) or parsed.is_integer():
                    return int(parsed)
        return _UNCHANGED
    if type_name == "boolean":
        if value is None:
            return False
        if value == "true":
            return True
        if value == "false":
            return False
        if _is_number(value) and value in (0, 1):
            return value == 1
        return _UNCHANGED
    if type_name == "string":
        if value is None:
            return ""
        if isinstance(value, (bool, int, float)):
            return _js_string(value)
        return _UNCHANGED
    if type_name == "null":
        if value == "" or (value is False) or (_is_number(value) and value == 0):
            return None
        return _UNCHANGED
    return _UNCHANGED


def _schema_types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


# --- compiled validators, cached per root schema --------------------------------------------

class _SchemaContext:
    """A root schema with its compiled validator and lazily compiled sub-schema validators."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.cls = _validator_class(root)
        self.validator = self.cls(root, format_checker=self.cls.FORMAT_CHECKER)
        self._subs: dict[int, tuple[Any, Any]] = {}

    def sub_validator(self, schema: Any) -> Any | None:
        """Validator for a sub-schema that resolves ``#/...`` refs against the root."""
        if schema is self.root:
            return self.validator
        hit = self._subs.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        validator = None
        if isinstance(schema, (dict, bool)):
            try:
                target = schema
                if isinstance(schema, dict):
                    # "#/$defs/X" inside the sub-schema must still point into the root.
                    target = {**schema}
                    for key in ("$defs", "definitions"):
                        if key in self.root and key not in target:
                            target[key] = self.root[key]
                    if "$schema" in self.root and "$schema" not in target:
                        target["$schema"] = self.root["$schema"]
                validator = self.cls(target, format_checker=self.cls.FORMAT_CHECKER)
            except Exception:
                validator = None
        self._subs[id(schema)] = (schema, validator)
        return validator

    def is_valid(self, schema: Any, value: Any) -> bool | None:
        validator = self.sub_validator(schema)
        if validator is None:
            return None
        try:
            return validator.is_valid(value)
        except Exception:
            return None


def _uses_tuple_items(schema: Any) -> bool:
    if isinstance(schema, dict):
        if isinstance(schema.get("items"), list):
            return True
        return any(_uses_tuple_items(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses_tuple_items(v) for v in schema)
    return False


def _jsonschema() -> Any:
    """Import jsonschema on first validation, without its slowest optional extra.

    ``import jsonschema`` eagerly tries the format-checker helpers; one of them,
    ``rfc3987_syntax``, compiles a grammar for about a second. We never check
    ``format``, so it is hidden during that one import (and only if nobody imported
    it before), which keeps the first tool call of a kernel fast.
    """
    module = sys.modules.get("jsonschema")
    if module is not None:
        return module
    hide = "rfc3987_syntax" not in sys.modules
    if hide:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # -> ImportError
    try:
        import jsonschema
        import jsonschema.validators
    finally:
        if hide and sys.modules.get("rfc3987_syntax", False) is None:
            del sys.modules["rfc3987_syntax"]
    return jsonschema


def _validator_class(schema: dict[str, Any]) -> Any:
    jsonschema = _jsonschema()
    Draft7Validator, Draft202012Validator = jsonschema.Draft7Validator, jsonschema.Draft202012Validator
    if "$schema" in schema:
        validator_for = jsonschema.validators.validator_for
        return validator_for(schema, default=Draft202012Validator)
    # "items": [...] (tuple form) is only meaningful before 2020-12, which pi's TypeBox accepts.
    return Draft7Validator if _uses_tuple_items(schema) else Draft202012Validator


_contexts: OrderedDict[int, _SchemaContext] = OrderedDict()
_CONTEXT_CACHE_SIZE = 256


def _context_for(schema: dict[str, Any]) -> _SchemaContext:
    ctx = _contexts.get(id(schema))
    if ctx is not None and ctx.root is schema:
        _contexts.move_to_end(id(schema))
        return ctx
    ctx = _SchemaContext(schema)
    _contexts[id(schema)] = ctx
    if len(_contexts) > _CONTEXT_CACHE_SIZE:
        _contexts.popitem(last=False)
    return ctx


# --- the pi passes ------------------------------------------------------------------------

def normalize_optional_nulls(value: Any, schema: Any, ctx: _SchemaContext | None = None) -> None:
    """Delete ``null`` values of optional, non-``$ref`` properties whose schema rejects null."""
    if not isinstance(schema, dict):
        return
    if ctx is None:
        ctx = _context_for(schema)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, list):
            for item, item_schema in zip(value, items, strict=False):  # extra items have no schema
                normalize_optional_nulls(item, item_schema, ctx)
        elif isinstance(items, dict):
            for item in value:
                normalize_optional_nulls(item, items, ctx)
        return
    properties = schema.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, dict):
        return
    required = set(schema.get("required") or [])
    for key, prop_schema in properties.items():
        if key not in value:
            continue
        if (value[key] is None and key not in required
                and not (isinstance(prop_schema, dict) and isinstance(prop_schema.get("$ref"), str))
                and ctx.is_valid(prop_schema, None) is False):
            del value[key]
        else:
            normalize_optional_nulls(value[key], prop_schema, ctx)


def coerce_with_json_schema(value: Any, schema: Any, ctx: _SchemaContext | None = None) -> Any:
    """AJV-compatible coercion; mutates containers in place and returns the new value."""
    if not isinstance(schema, dict):
        return value
    if ctx is None:
        ctx = _context_for(schema)
    current = value
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        for nested in all_of:
            current = coerce_with_json_schema(current, nested, ctx)
    for keyword in ("anyOf", "oneOf"):
        arms = schema.get(keyword)
        if isinstance(arms, list):
            current = _coerce_union(current, arms, ctx)
    types = _schema_types(schema)
    already = len(types) > 1 and any(_matches_json_type(current, t) for t in types)
    if types and not already:
        for type_name in types:
            candidate = _coerce_primitive(current, type_name)
            if candidate is not _UNCHANGED:
                current = candidate
                break
    if "object" in types and isinstance(current, dict):
        _coerce_object(current, schema, ctx)
    if "array" in types and isinstance(current, list):
        _coerce_array(current, schema, ctx)
    return current


def _coerce_union(value: Any, arms: list[Any], ctx: _SchemaContext) -> Any:
    for arm in arms:
        if ctx.is_valid(arm, value):
            return value
    for arm in arms:
        candidate = coerce_with_json_schema(copy.deepcopy(value), arm, ctx)
        if ctx.is_valid(arm, candidate):
            return candidate
    return value


def _coerce_object(value: dict[str, Any], schema: dict[str, Any], ctx: _SchemaContext) -> None:
    properties = schema.get("properties")
    defined = set(properties) if isinstance(properties, dict) else set()
    if isinstance(properties, dict):
        for key, prop_schema in properties.items():
            if key in value:
                value[key] = coerce_with_json_schema(value[key], prop_schema, ctx)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in list(value):
            if key not in defined:
                value[key] = coerce_with_json_schema(value[key], extra, ctx)


def _coerce_array(value: list[Any], schema: dict[str, Any], ctx: _SchemaContext) -> None:
    items = schema.get("items")
    prefix = schema.get("prefixItems")  # 2020-12 tuple form, same rule as a tuple "items"
    tuple_schemas = items if isinstance(items, list) else prefix if isinstance(prefix, list) else None
    if tuple_schemas is not None:
        for index, item_schema in enumerate(tuple_schemas[:len(value)]):
            value[index] = coerce_with_json_schema(value[index], item_schema, ctx)
        if isinstance(items, dict):
            for index in range(len(tuple_schemas), len(value)):
                value[index] = coerce_with_json_schema(value[index], items, ctx)
        return
    if isinstance(items, dict):
        for index in range(len(value)):
            value[index] = coerce_with_json_schema(value[index], items, ctx)


# --- error text ------------------------------------------------------------------------------

_COMPARISON = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
_KEYWORD_ORDER = {"type": 0, "required": 1, "properties": 2, "additionalProperties": 3}


_TEMPLATES = {  # TypeBox/AJV wording; "{spec}" is the keyword's schema value
    "additionalProperties": "must not have additional properties",
    "anyOf": "must match a schema in anyOf",
    "oneOf": "must match exactly one schema in oneOf",
    "const": "must be equal to constant",
    "enum": "must be equal to one of the allowed values",
    "format": 'must match format "{spec}"',
    "pattern": 'must match pattern "{spec}"',
    "maxItems": "must not have more than {spec} items",
    "minItems": "must not have fewer than {spec} items",
    "maxLength": "must not have more than {spec} characters",
    "minLength": "must not have fewer than {spec} characters",
    "maxProperties": "must not have more than {spec} properties",
    "minProperties": "must not have fewer than {spec} properties",
    "not": "must not be valid",
    "uniqueItems": "must not have duplicate items",
    "contains": "must contain at least 1 valid item",
    "unevaluatedProperties": "must not have unevaluated properties",
    "unevaluatedItems": "must not have unevaluated items",
}


def _type_message(expected: Any) -> str:
    if isinstance(expected, list):
        return "must be either " + " or ".join(map(str, expected))
    return f"must be {expected}"


def _message(error: Any) -> str:
    keyword, spec = error.validator, error.validator_value
    if keyword == "type":
        return _type_message(spec)
    if keyword in _COMPARISON:
        return f"must be {_COMPARISON[keyword]} {_js_string(spec) if _is_number(spec) else spec}"
    if keyword == "multipleOf":
        return f"must be multiple of {_js_string(spec) if _is_number(spec) else spec}"
    if isinstance(keyword, str) and keyword in _TEMPLATES:
        return _TEMPLATES[keyword].format(spec=spec)
    if keyword in (False, "false") or error.schema is False:
        return "schema is false"
    return error.message


def _dotted(path: Any) -> str:
    return ".".join(str(part) for part in path)


def _format_errors(errors: list[Any]) -> list[str]:
    # TypeBox order at one object: type, required, properties, additionalProperties.
    errors = sorted(errors, key=lambda e: _KEYWORD_ORDER.get(
        e.relative_schema_path[0] if e.relative_schema_path else "", 4))
    lines: list[str] = []
    missing_by_path: dict[str, tuple[int, list[str]]] = {}
    for error in errors:
        base = _dotted(error.absolute_path)
        if error.validator == "required":
            # jsonschema reports each missing property; TypeBox one error per object.
            missing = _missing_property(error)
            if base in missing_by_path:
                missing_by_path[base][1].append(missing)
                continue
            missing_by_path[base] = (len(lines), [missing])
            lines.append("")  # filled below, keeps the position
            continue
        if error.validator in ("anyOf", "oneOf") and error.context:
            # TypeBox lists every arm's errors before the union's own line.
            lines.extend(_format_errors(list(error.context)))
        lines.append(f"  - {base or 'root'}: {_message(error)}")
    for base, (index, names) in missing_by_path.items():
        path = f"{base}.{names[0]}" if base else names[0]
        lines[index] = f"  - {path}: must have required properties {', '.join(names)}"
    return lines


def _missing_property(error: Any) -> str:
    for name in error.validator_value or []:
        if isinstance(error.instance, dict) and name not in error.instance and repr(name) in error.message:
            return name
    match = re.match(r"'(.*)' is a required property", error.message)
    return match.group(1) if match else str(error.message)


def _pydantic_lines(exc: Any) -> list[str]:
    lines = []
    for err in exc.errors():
        path = _dotted(err.get("loc", ()))
        if err.get("type") == "missing":
            message = f"must have required properties {err['loc'][-1]}" if err.get("loc") else "missing"
        else:
            message = err.get("msg", "invalid")
        lines.append(f"  - {path or 'root'}: {message}")
    return lines


def _failure(name: str, lines: list[str], original: Any) -> ToolArgumentsError:
    errors = "\n".join(lines) or "Unknown validation error"
    received = json.dumps(original, indent=2, ensure_ascii=False, default=str)
    return ToolArgumentsError(f'Validation failed for tool "{name}":\n{errors}\n\nReceived arguments:\n{received}')


# --- public API -------------------------------------------------------------------------------

_model_schemas: dict[type, dict[str, Any]] = {}


def _model_schema(model_cls: type) -> dict[str, Any]:
    # cached so that the compiled-validator cache (keyed by schema identity) hits
    schema = _model_schemas.get(model_cls)
    if schema is None:
        schema = _model_schemas[model_cls] = model_cls.model_json_schema()  # type: ignore[attr-defined]  # a pydantic model class, typed `type` by its callers
    return schema


def validate_tool_call(tools: Any, tool_call: Any) -> Any:
    """Find the tool named by the call and validate its arguments."""
    name = get_field(tool_call, "name")
    for tool in tools or []:
        if get_field(tool, "name") == name:
            return validate_tool_arguments(tool, tool_call)
    raise ToolNotFoundError(f'Tool "{name}" not found')


def validate_tool_arguments(tool: Any, tool_call: Any) -> Any:
    """Coerce and validate a call's arguments; returns the clone (or the pydantic instance).

    ``tool``: anything with ``name`` and ``parameters`` (JSON Schema dict), optionally
    ``parameters_model`` (a pydantic model class). ``tool_call``: a ToolCall or its dict.
    The caller's arguments are never mutated.
    """
    original = get_field(tool_call, "arguments")
    if original is None:
        original = {}
    name = get_field(tool_call, "name") or get_field(tool, "name")
    schema = get_field(tool, "parameters")
    model_cls = get_field(tool, "parameters_model")
    if model_cls is None and isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        model_cls, schema = schema, _model_schema(schema)  # a bare pydantic class as parameters
    args = copy.deepcopy(original)
    if isinstance(schema, dict):
        ctx = _context_for(schema)
        normalize_optional_nulls(args, schema, ctx)
        args = coerce_with_json_schema(args, schema, ctx)
    else:
        ctx = None
    if model_cls is not None:
        from pydantic import ValidationError as PydanticValidationError

        try:
            return model_cls.model_validate(args)
        except PydanticValidationError as exc:
            raise _failure(name, _pydantic_lines(exc), original) from None
    if ctx is None:
        return args
    errors = list(ctx.validator.iter_errors(args))
    if not errors:
        return args
    raise _failure(name, _format_errors(errors), original)

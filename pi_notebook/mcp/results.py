"""An MCP ``CallToolResult`` as what the model gets back, budgeted and redacted like Python
output (tools/output/format.py, tools/trust/redact.py).

* text: cut head + tail to ``max_output_chars`` (shared between the text blocks);
* images: attached when the model takes images (at most ``max_images``, downscaled to the
  pixel budget), otherwise named; audio is named;
* resource links: one line each (name, URI, type); embedded resources: their text (cut), a
  binary one is named;
* structured content: as JSON text when the content blocks say nothing else, and always,
  redacted, in ``details`` (what the namespace call returns, what the card may show);
* ``isError``: an error result.

Redaction is not field by field: the whole result is first turned into plain data and every
string in it (names, URIs, content types, metadata, keys) goes through ``redact_all`` (known
secrets and credential shapes, tools/trust/credentials.py), so a field added to the protocol later
is covered too. Only base64 payloads (``data``, ``blob``) are kept as they are: they are
checked as images or named, never shown as text. A string over ``_SHAPES_CHARS`` gets the
known secrets redacted in the walk and the credential shapes once it is cut to what is shown
(the shape patterns cost about 1.7 s a megabyte; the known-secret pass 0.03 s).

The SDK's models are read by attribute or dumped to plain data, so this module does not
import the SDK.
"""

from __future__ import annotations

import json
from typing import Any

from ..agent.types import AgentToolResult
from ..ai.types import ImageContent, TextContent
from ..tools.output.format import cut, prepare_image
from ..tools.python.python_tool import PythonToolSettings
from ..tools.trust.credentials import redact_all, redact_shapes
from ..tools.trust.redact import redact

__all__ = ["convert_result", "error_result", "redact_result", "IMAGE_TYPES"]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_STRUCTURED_CHARS = 4000


def _field(obj: Any, name: str, alias: str | None = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, obj.get(alias) if alias else None)
    value = getattr(obj, name, None)
    return value if value is not None or alias is None else getattr(obj, alias, None)


_PAYLOADS = frozenset({"data", "blob"})  # base64 bytes, not text anyone reads
_SHAPES_CHARS = 64 * 1024  # longer strings: shapes after the cut (module docstring)
_MAX_DEPTH = 64  # deeper nesting is dropped, not walked (a bound, not a policy)


def _plain(obj: Any) -> Any:
    """An SDK model as plain data (pydantic's ``model_dump``), another object as its
    attributes; plain data as it is."""
    if isinstance(obj, (str, bytes, int, float, bool, dict, list, tuple, type)) or obj is None:
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:  # a model that cannot dump itself: its attributes, below
            pass
    attributes = getattr(obj, "__dict__", None)
    return dict(attributes) if isinstance(attributes, dict) else obj


def _tree(obj: Any, depth: int = 0) -> Any:
    """The result as plain data: dicts, lists, strings, numbers; base64 payloads as they are,
    any other object as its text; nesting past ``_MAX_DEPTH`` dropped."""
    obj = _plain(obj)
    if obj is None or isinstance(obj, (str, bool, int, float, bytes)):
        return obj
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(obj, dict):
        return {str(k): (_Payload(v) if k in _PAYLOADS and isinstance(v, (str, bytes)) else _tree(v, depth + 1))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_tree(v, depth + 1) for v in obj]
    return str(obj)


class _Payload:
    """A base64 payload inside the tree: not a string the walk redacts."""

    __slots__ = ("value",)

    def __init__(self, value: str | bytes) -> None:
        self.value = value


def _strings(tree: Any) -> list[str]:
    out: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            out.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _redacted(tree: Any, clean: bool) -> Any:
    if isinstance(tree, _Payload):
        return tree.value
    if isinstance(tree, str):
        if len(tree) > _SHAPES_CHARS:
            return redact(tree)
        return tree if clean else redact_all(tree)
    if isinstance(tree, dict):
        return {(k if clean else redact_all(k)): _redacted(v, clean) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_redacted(v, clean) for v in tree]
    return tree


def redact_result(obj: Any) -> Any:
    """Every string of an MCP result (module docstring), keys included; base64 payloads kept.

    One pass of the patterns over all the short strings joined by newlines decides whether
    any of them needs redacting (a match inside one string is a match in the joined text, and
    no pattern matches less for text after it); only then is each string redacted on its own,
    so a result without secrets costs one pass, not one per string."""
    tree = _tree(obj)
    short = "\n".join(s for s in _strings(tree) if len(s) <= _SHAPES_CHARS)
    return _redacted(tree, clean=redact_all(short) == short)


def convert_result(result: Any, settings: PythonToolSettings, *, server: str, tool: str) -> AgentToolResult:
    """The tool result for one MCP call (module docstring)."""
    result = redact_result(result)
    texts: list[str] = []
    notes: list[str] = []
    images: list[ImageContent] = []
    accepts = settings.accepts_images()
    for block in _field(result, "content") or []:
        kind = _field(block, "type")
        if kind == "text":
            texts.append(str(_field(block, "text") or ""))
        elif kind == "image":
            _add_image(block, images, notes, settings, accepts)
        elif kind == "audio":
            notes.append(f"[audio: {_field(block, 'mime_type', 'mimeType') or '?'}, not shown to the model]")
        elif kind == "resource_link":
            name = _field(block, "name") or ""
            mime = _field(block, "mime_type", "mimeType")
            notes.append(f"[resource link: {name} {_field(block, 'uri')}" + (f" ({mime})" if mime else "") + "]")
        elif kind == "resource":
            resource = _field(block, "resource")
            uri = _field(resource, "uri")
            text = _field(resource, "text")
            if text is not None:
                texts.append(f"[resource {uri}]\n{text}")
            else:
                mime = _field(resource, "mime_type", "mimeType") or "binary"
                if mime in IMAGE_TYPES:
                    _add_image({"data": _field(resource, "blob"), "mime_type": mime}, images, notes,
                               settings, accepts)
                else:
                    notes.append(f"[resource {uri}: {mime}, not shown to the model]")
        else:
            notes.append(f"[{kind or 'unknown'} content, not shown to the model]")
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None and not texts:
        try:
            dumped = json.dumps(structured, ensure_ascii=False, indent=1, default=str)
        except (TypeError, ValueError):
            dumped = str(structured)
        texts.append(f"[structured content]\n{cut(dumped, _STRUCTURED_CHARS)}")
    budget = settings.max_output_chars
    total = sum(len(t) for t in texts) or 1
    parts = [cut(t, max(200, budget * len(t) // total) if budget > 0 else 0).rstrip() for t in texts]
    parts.extend(notes)
    is_error = bool(_field(result, "is_error", "isError"))
    if not parts:
        parts.append("(the tool returned no content)")
    shown = "\n\n".join(parts)
    if any(len(t) > _SHAPES_CHARS for t in texts):  # its shapes were left for the cut text
        shown = redact_shapes(shown)
    content: list[TextContent | ImageContent] = [TextContent(text=shown)]
    content.extend(images)
    details = {"mcp": {"server": server, "tool": tool, "is_error": is_error, "structured": structured}}
    return AgentToolResult(content=content, details=details, is_error=is_error)


def _add_image(block: Any, images: list[ImageContent], notes: list[str], settings: PythonToolSettings,
               accepts: bool) -> None:
    mime = str(_field(block, "mime_type", "mimeType") or "")
    data = _field(block, "data")
    if mime not in IMAGE_TYPES or not data:
        notes.append(f"[image: {mime or 'unknown type'}, not shown]")
        return
    if not accepts:
        notes.append(f"[image: {mime}, not shown: the model does not take images]")
        return
    if len(images) >= settings.max_images:
        notes.append(f"[image omitted: at most {settings.max_images} images per call]")
        return
    prepared = prepare_image(data, mime, settings.image_pixel_budget)  # every type: headers checked first
    if isinstance(prepared, str):
        notes.append(f"[image: {prepared}]")
        return
    data, mime, note = prepared
    images.append(ImageContent(data=data, mime_type=mime))
    notes.append(f"[image {len(images)} attached ({note})]")


def error_result(text: str, *, server: str, tool: str) -> AgentToolResult:
    """A call that got no answer (unavailable server, timeout, crash): an error result."""
    return AgentToolResult(content=[TextContent(text=redact_all(text))], is_error=True,
                           details={"mcp": {"server": server, "tool": tool, "is_error": True,
                                            "structured": None}})

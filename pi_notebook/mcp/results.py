"""An MCP ``CallToolResult`` as what the model gets back, budgeted and redacted like Python
output (tools/format.py, tools/redact.py).

* text: cut head + tail to ``max_output_chars`` (shared between the text blocks);
* images: attached when the model takes images (at most ``max_images``, downscaled to the
  pixel budget), otherwise named; audio is named;
* resource links: one line each (name, URI, type); embedded resources: their text (cut), a
  binary one is named;
* structured content: as JSON text when the content blocks say nothing else, and always,
  redacted, in ``details`` (what the namespace call returns, what the card may show);
* ``isError``: an error result.

The SDK's models are read by attribute, so this module does not import the SDK.
"""

from __future__ import annotations

import json
from typing import Any

from ..agent.types import AgentToolResult
from ..ai.types import ImageContent, TextContent
from ..tools.format import cut, prepare_image
from ..tools.python_tool import PythonToolSettings
from ..tools.redact import redact, redact_data

__all__ = ["convert_result", "error_result", "IMAGE_TYPES"]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_STRUCTURED_CHARS = 4000


def _field(obj: Any, name: str, alias: str | None = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, obj.get(alias) if alias else None)
    value = getattr(obj, name, None)
    return value if value is not None or alias is None else getattr(obj, alias, None)


def convert_result(result: Any, settings: PythonToolSettings, *, server: str, tool: str) -> AgentToolResult:
    """The tool result for one MCP call (module docstring)."""
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
    structured = redact_data(structured) if structured is not None else None
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
    content: list[TextContent | ImageContent] = [TextContent(text="\n\n".join(parts))]
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
    return AgentToolResult(content=[TextContent(text=redact(text))], is_error=True,
                           details={"mcp": {"server": server, "tool": tool, "is_error": True,
                                            "structured": None}})

"""Export a conversation as a plain notebook (nbformat 4).

User and assistant text become Markdown cells; every call of the ``python`` tool
becomes a code cell carrying the outputs captured when the agent ran it. The
notebook needs no extension: it runs top to bottom in a fresh kernel.

Code whose tool result is an error is exported as a Markdown code block, not as a
code cell: an error result may mean the call was denied or aborted and never ran,
and running it on export would both break "Run All" and run code nobody approved.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..ai.types import get_field

__all__ = ["build_notebook", "export_notebook", "PYTHON_TOOL_NAME"]

PYTHON_TOOL_NAME = "python"
_RESULT_PREVIEW_CHARS = 2000


def _nbformat() -> Any:
    # imported on use: the session store must work without nbformat installed
    try:
        import nbformat
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "exporting a notebook needs nbformat: pip install nbformat") from None
    return nbformat




def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _text_of(content: Any) -> str:
    return "\n\n".join(get_field(b, "text") or "" for b in _blocks(content)
                       if get_field(b, "type") == "text").strip()


def _fence(text: str, lang: str = "") -> str:
    # a fence longer than any backtick run inside, so the block cannot be closed early
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _outputs_from_result(result: Any) -> list[Any]:
    """nbformat outputs for a python tool result.

    If the tool left nbformat-shaped outputs in ``details["outputs"]`` they are used
    as they are; otherwise text content becomes a stdout stream and each image a
    ``display_data`` output.
    """
    nbformat = _nbformat()
    v4 = nbformat.v4
    details = get_field(result, "details")
    if isinstance(details, Mapping) and isinstance(details.get("outputs"), list):
        outputs = []
        for raw in details["outputs"]:
            try:
                out = nbformat.from_dict(raw)
                nbformat.validate(v4.new_notebook(cells=[v4.new_code_cell(outputs=[out])]))
            except Exception:  # a malformed entry must not break the export
                continue
            outputs.append(out)
        return outputs
    outputs: list[Any] = []
    text_parts: list[str] = []

    def flush_text() -> None:
        if text_parts:
            text = "\n".join(text_parts)
            outputs.append(v4.new_output("stream", name="stdout",
                                         text=text if text.endswith("\n") else text + "\n"))
            text_parts.clear()

    for block in _blocks(get_field(result, "content")):
        kind = get_field(block, "type")
        if kind == "text":
            text_parts.append(get_field(block, "text") or "")
        elif kind == "image":
            flush_text()
            mime = get_field(block, "mime_type", "mimeType") or "image/png"
            outputs.append(v4.new_output("display_data", data={mime: get_field(block, "data") or ""}))
    flush_text()
    return outputs


def _call_markdown(call: Any, result: Any, note: str) -> str:
    name = get_field(call, "name") or "?"
    args = get_field(call, "arguments") or {}
    if name == PYTHON_TOOL_NAME and isinstance(args.get("code"), str):
        body = _fence(args["code"], "python")
    else:
        body = _fence(json.dumps(args, indent=2, ensure_ascii=False, default=repr), "json")
    parts = [f"**Tool call `{name}`** ({note})", body]
    if result is not None:
        text = _text_of(get_field(result, "content"))
        if len(text) > _RESULT_PREVIEW_CHARS:
            text = text[:_RESULT_PREVIEW_CHARS] + f"\n... [{len(text) - _RESULT_PREVIEW_CHARS} more chars]"
        if text:
            parts.append(_fence(text))
    return "\n\n".join(parts)


def build_notebook(messages: Iterable[Any], *, title: str | None = None,
                   include_thinking: bool = False) -> Any:
    """The conversation as an in-memory nbformat 4 notebook (a validated ``NotebookNode``)."""
    nbformat = _nbformat()
    v4 = nbformat.v4
    messages = list(messages)
    results: dict[str, Any] = {}
    for message in messages:
        if get_field(message, "role") == "toolResult":
            results[get_field(message, "tool_call_id", "toolCallId")] = message

    cells: list[Any] = []
    if title:
        cells.append(v4.new_markdown_cell(f"# {title}"))
    for message in messages:
        role = get_field(message, "role")
        if role == "user":
            text = _text_of(get_field(message, "content"))
            images = sum(1 for b in _blocks(get_field(message, "content")) if get_field(b, "type") == "image")
            if images:
                text += f"\n\n*({images} image{'s' if images > 1 else ''} attached)*"
            if text.strip():
                cells.append(v4.new_markdown_cell(f"**User:**\n\n{text}"))
        elif role == "assistant":
            prose: list[str] = []

            def flush_prose() -> None:
                if prose:
                    cells.append(v4.new_markdown_cell("**Assistant:**\n\n" + "\n\n".join(prose)))
                    prose.clear()

            for block in _blocks(get_field(message, "content")):
                kind = get_field(block, "type")
                if kind == "text" and (get_field(block, "text") or "").strip():
                    prose.append(get_field(block, "text"))
                elif kind == "thinking" and include_thinking and (get_field(block, "thinking") or "").strip():
                    prose.append("> " + get_field(block, "thinking").replace("\n", "\n> "))
                elif kind == "toolCall":
                    flush_prose()
                    cells.append(_tool_call_cell(block, results.get(get_field(block, "id"))))
            flush_prose()
            error = get_field(message, "error_message", "errorMessage")
            if get_field(message, "stop_reason", "stopReason") in ("error", "aborted") and error:
                cells.append(v4.new_markdown_cell(f"*The response ended early: {error}*"))
        # tool results are attached to their calls; custom messages are not exported
    notebook = v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.validate(notebook)
    return notebook


def _tool_call_cell(call: Any, result: Any) -> Any:
    v4 = _nbformat().v4
    args = get_field(call, "arguments") or {}
    is_python = get_field(call, "name") == PYTHON_TOOL_NAME and isinstance(args.get("code"), str)
    if not is_python:
        return v4.new_markdown_cell(_call_markdown(call, result, "not code, shown for the record"))
    if result is None:
        return v4.new_markdown_cell(_call_markdown(call, None, "no result: it did not run"))
    if get_field(result, "is_error", "isError"):
        return v4.new_markdown_cell(_call_markdown(call, result, "failed or was not run"))
    return v4.new_code_cell(source=args["code"], outputs=_outputs_from_result(result))


def export_notebook(messages: Iterable[Any], path: str | os.PathLike[str], *,
                    title: str | None = None, include_thinking: bool = False,
                    overwrite: bool = False) -> Path:
    """Write the conversation to ``path`` (``.ipynb``); returns the path written.

    Written to a temporary file and renamed, so a failure leaves no half notebook.
    """
    nbformat = _nbformat()
    target = Path(path)
    if target.suffix != ".ipynb":
        raise ValueError(f"export path must end with .ipynb: {target}")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists")
    notebook = build_notebook(messages, title=title, include_thinking=include_thinking)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            nbformat.write(notebook, f)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target

"""Export a conversation as a plain notebook (nbformat 4).

User and assistant text become Markdown cells; every call of the ``python`` tool
becomes a code cell carrying the outputs captured when the agent ran it. The
notebook needs no extension: it runs top to bottom in a fresh kernel.

Code whose tool result is an error is exported as a Markdown code block, not as a
code cell: an error result may mean the call was denied or aborted and never ran,
and running it on export would both break "Run All" and run code nobody approved.
Its recorded outputs (what the code printed before it failed) follow as text.

Outputs come from the call's ``PythonCallDetails`` (``tools/output/updates.py``; the live
model or the dict a session file stores): the real recorded outputs, not the
budget-cut text the model got. Older results without it fall back to their content.

As safe as the view: user and assistant text (and ``text/markdown`` outputs) go
through ``widgets/markdown.markdown_for_transcript`` (no raw HTML, scripts, remote
images or ``javascript:`` links); display outputs keep only ``text/plain``,
``image/png``, ``image/jpeg``, ``image/gif`` and sanitised ``text/markdown``
(HTML, SVG, JavaScript and widget views are dropped, with a note when nothing is
left); every text is redacted again on the way out, and a notebook-context note the model
quoted is left out (``widgets/markdown.without_notes``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..ai.types import get_field
from ..tools.trust.redact import redact, redact_data
from ..tools.output.updates import (
    DisplayOutput,
    ErrorOutput,
    ResultOutput,
    StreamOutput,
    ToolOutput,
    parse_call_details,
)
from ..widgets.markdown import markdown_for_transcript, without_notes

__all__ = ["build_notebook", "export_notebook", "PYTHON_TOOL_NAME"]

PYTHON_TOOL_NAME = "python"
_RESULT_PREVIEW_CHARS = 2000
_SAFE_BINARY = ("image/png", "image/jpeg", "image/gif")


def _nbformat() -> Any:
    # imported on use: the session store must work without nbformat installed
    try:
        import nbformat
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "exporting a notebook needs nbformat: pip install nbformat") from None
    return nbformat




_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")


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


def _safe_bundle(data: Mapping[str, Any]) -> dict[str, Any]:
    """Only MIME types that cannot run code in a trusted notebook (module doc)."""
    out: dict[str, Any] = {}
    for mime in _SAFE_BINARY:
        if isinstance(data.get(mime), str):
            out[mime] = "".join(data[mime].split())
    markdown = data.get("text/markdown")
    if isinstance(markdown, list):
        markdown = "".join(str(m) for m in markdown)
    if isinstance(markdown, str):
        out["text/markdown"] = markdown_for_transcript(redact(markdown))
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(str(p) for p in plain)
    if isinstance(plain, str):
        out["text/plain"] = redact(plain)
    if not out:
        kinds = ", ".join(sorted(str(k) for k in data)) or "empty"
        out["text/plain"] = f"[output not exported: {kinds}]"
    return out


def _nb_output(record: ToolOutput) -> Any:
    v4 = _nbformat().v4
    if isinstance(record, StreamOutput):
        return v4.new_output("stream", name=record.name, text=redact(record.text))
    if isinstance(record, DisplayOutput):
        return v4.new_output("display_data", data=_safe_bundle(record.data), metadata={})
    if isinstance(record, ResultOutput):
        return v4.new_output("execute_result", data=_safe_bundle(record.data), metadata={},
                             execution_count=None)
    assert isinstance(record, ErrorOutput)
    return v4.new_output("error", ename=redact(record.ename), evalue=redact(record.evalue),
                         traceback=redact_data(list(record.traceback)))


def _recorded_outputs(result: Any) -> list[Any] | None:
    """nbformat outputs from the call's PythonCallDetails, or None if it has none."""
    details = parse_call_details(get_field(result, "details"))
    if details is None:
        return None
    outputs: list[Any] = []
    for record in details.outputs:
        out = _nb_output(record)
        if outputs and out.output_type == "stream" and outputs[-1].output_type == "stream" \
                and outputs[-1].name == out.name:
            outputs[-1].text += out.text  # one stream output per run of writes, like Jupyter
        else:
            outputs.append(out)
    return outputs


def _outputs_from_result(result: Any) -> list[Any]:
    """nbformat outputs for a python tool result: the recorded outputs when the result
    has them, else its text content as a stdout stream and each image as a display."""
    recorded = _recorded_outputs(result)
    if recorded is not None:
        return recorded
    v4 = _nbformat().v4
    outputs: list[Any] = []
    text_parts: list[str] = []

    def flush_text() -> None:
        if text_parts:
            text = redact("\n".join(text_parts))
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
            if mime in _SAFE_BINARY:
                outputs.append(v4.new_output("display_data", data={mime: get_field(block, "data") or ""}))
    flush_text()
    return outputs


def _recorded_text(result: Any) -> str:
    """What a failed call printed, as plain text, for its Markdown record."""
    details = parse_call_details(get_field(result, "details"))
    if details is None:
        return ""
    parts: list[str] = []
    for record in details.outputs:
        if isinstance(record, StreamOutput):
            parts.append(record.text)
        elif isinstance(record, ErrorOutput):
            parts.append("\n".join(record.traceback) or f"{record.ename}: {record.evalue}")
    return redact("".join(p if p.endswith("\n") else p + "\n" for p in parts if p))


def _call_markdown(call: Any, result: Any, note: str) -> str:
    name = get_field(call, "name") or "?"
    args = get_field(call, "arguments") or {}
    if name == PYTHON_TOOL_NAME and isinstance(args.get("code"), str):
        body = _fence(redact(args["code"]), "python")
    else:
        body = _fence(redact(json.dumps(args, indent=2, ensure_ascii=False, default=repr)), "json")
    parts = [f"**Tool call `{markdown_for_transcript(str(name))}`** ({note})", body]
    if result is not None:
        text = _recorded_text(result) or _text_of(get_field(result, "content"))
        if len(text) > _RESULT_PREVIEW_CHARS:
            text = text[:_RESULT_PREVIEW_CHARS] + f"\n... [{len(text) - _RESULT_PREVIEW_CHARS} more chars]"
        if text:
            parts.append(_fence(redact(text)))
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
        cells.append(v4.new_markdown_cell(f"# {_safe_markdown(title)}"))
    for message in messages:
        role = get_field(message, "role")
        if role == "user":
            text = _text_of(get_field(message, "content"))
            images = sum(1 for b in _blocks(get_field(message, "content")) if get_field(b, "type") == "image")
            if images:
                text += f"\n\n*({images} image{'s' if images > 1 else ''} attached)*"
            author, shown = get_field(message, "author"), get_field(message, "shown")
            if isinstance(author, str) and author and isinstance(shown, str) and shown:
                # a run check's turn (agent/types.CheckMessage): the product's words, not the user's
                cells.append(v4.new_markdown_cell(f"**{_safe_markdown(author)}:**\n\n{_safe_markdown(shown)}"))
            elif text.strip():
                cells.append(v4.new_markdown_cell(f"**User:**\n\n{_safe_markdown(text)}"))
        elif role == "assistant":
            prose: list[str] = []

            def flush_prose(prose: list[str] = prose) -> None:
                if prose:
                    cells.append(v4.new_markdown_cell(
                        "**Assistant:**\n\n" + _safe_markdown("\n\n".join(prose))))
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
                cells.append(v4.new_markdown_cell(f"*The response ended early: {_safe_markdown(error)}*"))
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
    return v4.new_code_cell(source=redact(args["code"]), outputs=_outputs_from_result(result))


def _safe_markdown(text: str) -> str:
    # (a notebook-context note the model quoted is the model's input, not the conversation)
    return markdown_for_transcript(redact(without_notes(str(text))))


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
        # A model may send a lone surrogate, which UTF-8 cannot hold: it becomes U+FFFD
        # rather than failing the whole export.
        text = _LONE_SURROGATE_RE.sub("\ufffd", nbformat.writes(notebook))
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target

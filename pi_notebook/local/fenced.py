"""Code as a fenced block: the small model runs Python by replying with a ```python block.

Small code models are trained on Markdown far more than on code packed into a JSON string, and
a JSON string is where their code broke: an escape meant for Python read as JSON, the call's
closing quote written inside the code. In this form (``PI_NOTEBOOK_LOCAL_CODE=fenced``; the JSON
call stays the default, docs/design/local-model.md says why), used when the only offered tool is
``python``, the request carries no tool schema; the system
prompt says how to run code, and a reply is either prose (the answer) or one fenced block,
which becomes the ``python`` call with the block's text as its code, byte for byte.

The grammar puts no rule on the code but one: no line of it opens with the fence. A program
with such a line (inside a triple-quoted string) is written with a longer fence, which the
grammar admits as well, so every Python program can be written.

Earlier calls are shown to the model the same way (``as_fenced_messages``), so the
conversation it reads is in the form it writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CODE_FORMS", "FENCED_INSTRUCTIONS", "code_form", "fenced_applies", "fence", "fenced_rules",
    "as_fenced_messages", "call_code", "code_of_block", "open_block_code",
]

CODE_FORMS = ("json", "fenced")
FENCES = (3, 4)  # backticks of the fences the grammar admits: the shortest that fits the code
TOOL = "python"

FENCED_INSTRUCTIONS = (
    "\n\nTo run Python, reply with only a code block:\n```python\n<code>\n```\n"
    "It runs in the notebook's kernel and you get its output back. "
    "A reply without a code block is your answer to the user."
)


def code_form() -> str:
    """``json`` (the python call as a JSON object, as for every other tool; the default) or
    ``fenced``."""
    form = os.environ.get("PI_NOTEBOOK_LOCAL_CODE", "json").strip().lower()
    return form if form in CODE_FORMS else "json"


def _tool_name(spec: Any) -> str | None:
    if not isinstance(spec, Mapping):
        return getattr(spec, "name", None)
    inner = spec.get("function")
    function = inner if isinstance(inner, Mapping) else spec
    name = function.get("name")
    return name if isinstance(name, str) else None


def fenced_applies(tools: list[Any]) -> bool:
    """The fenced form stands for the python call only: with other tools offered, their JSON
    calls need the schemas in the prompt, and the form stays JSON."""
    return code_form() == "fenced" and [_tool_name(t) for t in tools] == [TOOL]


def fence(code: str) -> str:
    """``code`` as a fenced block, with a fence no line of the code opens with."""
    for size in FENCES:
        marker = "`" * size
        if not any(line.startswith(marker) for line in code.split("\n")):
            break
    else:
        size = max(FENCES)
        while any(line.startswith("`" * size) for line in code.split("\n")):
            size += 1
    marker = "`" * size
    return f"{marker}python\n{code}\n{marker}"


def _line_rule(size: int) -> str:
    """A line of code and its line break: any text that does not open with ``size`` backticks."""
    tail = "( [^`\\n] [^\\n]* )?"
    heads = ["[^`\\n] [^\\n]*"] + [f'"{"`" * k}" {tail}' for k in range(1, size)]
    return f"( {' | '.join(heads)} )? \"\\n\""


def fenced_rules(start: str | None = None) -> tuple[str, list[str]]:
    """(the alternative for ``root``, its rules): one fenced block, opened by the fence and
    ``python``, closed by the same fence on a line of its own, nothing after it. With
    ``start`` (a GBNF sequence), the code begins with it."""
    rules: list[str] = []
    names: list[str] = []
    for size in FENCES:
        marker = "`" * size
        first = f"{start} [^\\n]* \"\\n\"" if start else f"line{size}"
        rules.append(f'block{size} ::= "{marker}python\\n" {first} line{size}* "{marker}"')
        rules.append(f"line{size} ::= {_line_rule(size)}")
        names.append(f"block{size}")
    return " | ".join(names), rules


_BLOCK = re.compile(r"\A\s*(`{3,})[^\n`]*\n(.*?)\n?\1[ \t]*\Z", re.DOTALL)


def code_of_block(text: str) -> str | None:
    """The code of a reply that is one fenced block (the fence's own line and the closing fence
    left out; the text between, as written), or None when the reply is no such block."""
    match = _BLOCK.match(text)
    if match is None:
        return None
    return match.group(2)


def open_block_code(text: str) -> str:
    """The code written so far of a block still streaming (for the live view of the call)."""
    stripped = text.lstrip()
    newline = stripped.find("\n")
    if newline < 0:
        return ""
    body = stripped[newline + 1:]
    fence_size = len(stripped) - len(stripped.lstrip("`"))
    closing = "\n" + "`" * fence_size
    end = body.find(closing)
    if body.startswith("`" * fence_size):
        return ""
    return body if end < 0 else body[:end]


def call_code(call: object) -> str | None:
    """The ``code`` argument of an OpenAI-format tool call (arguments as JSON text or an
    object), or None."""
    function = call.get("function") if isinstance(call, Mapping) else None
    arguments: Any = function.get("arguments") if isinstance(function, Mapping) else None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    code = arguments.get("code") if isinstance(arguments, Mapping) else None
    return code if isinstance(code, str) else None


def as_fenced_messages(messages: list[dict[str, Any]]) -> None:
    """Earlier calls (OpenAI-format ``tool_calls`` of assistant messages) rewritten in place as
    the fenced blocks the model would write for them; the system message gets the form's
    instructions."""
    system = messages[0] if messages and messages[0].get("role") == "system" else {}
    if isinstance(system.get("content"), str) and FENCED_INSTRUCTIONS not in system["content"]:
        system["content"] += FENCED_INSTRUCTIONS
    for message in messages:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        blocks: list[str] = []
        for call in message.pop("tool_calls"):
            blocks.append(fence(call_code(call) or ""))
        text = message.get("content")
        parts = text if isinstance(text, list) else [{"text": text}]
        prose = "\n".join(str(p["text"]) for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))
        message["content"] = "\n".join(part for part in (prose.strip(), *blocks) if part)

"""Small helpers shared by the widget modules: text extraction from pi content blocks,
number formatting, text the user must see as it is."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..ai.types import ImageContent, PromptProgress, TextContent, ThinkingContent, ToolCall, get_field
from ..tools.trust.approval import INVISIBLE_RE, find_invisible, reveal_invisible

__all__ = ["code_ticks", "content_text", "cut_off_note", "content_images", "fmt_tokens", "fmt_cost", "fmt_seconds",
           "strip_control", "fence_for", "B64_RE", "find_invisible", "reveal_invisible", "mark_invisible", "safe_text"]

# Base64 payload of an image we embed ourselves as a data: URL.
B64_RE = re.compile(r"^[A-Za-z0-9+/=\s]+$")
# C0/C1 control characters other than tab and newline, and ANSI/OSC escape sequences:
# untrusted text must not drive a terminal (plain-text mode) or hide content.
_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def content_text(content: object) -> str:
    """The text of a message ``content``: a string, or a list of content blocks (pi's
    models; a custom message may hold pi-JSON blocks, read with ``get_field``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Iterable):
        return ""
    parts: list[str] = []
    for block in content:
        match block:
            case str():
                parts.append(block)
            case TextContent(text=text):
                parts.append(text)
            case ImageContent() | ThinkingContent() | ToolCall():
                pass
            case _ if get_field(block, "type") == "text":
                parts.append(str(get_field(block, "text", default="") or ""))
    return "\n".join(parts)


def content_images(content: object) -> list[tuple[str, str]]:
    """(mime_type, base64 data) of the image blocks in ``content``."""
    if content is None or isinstance(content, str) or not isinstance(content, Iterable):
        return []
    images = []
    for block in content:
        match block:
            case ImageContent(mime_type=mime, data=data):
                images.append((mime, data))
            case TextContent() | ThinkingContent() | ToolCall():
                pass
            case _ if get_field(block, "type") == "image":
                images.append((str(get_field(block, "mime_type", "mimeType", "") or ""),
                               str(get_field(block, "data", default="") or "")))
    return images


def strip_control(text: str) -> str:
    """Drop ANSI escape sequences and control characters (keeps ``\\n`` and ``\\t``)."""
    return _CONTROL_RE.sub("", _ANSI_RE.sub("", text.replace("\r\n", "\n")))


def cut_off_note(error_message: str | None) -> str:
    """Why a reply ended ``length``, said the same way by both views: the provider's reason when
    it cut the reply itself (local_repeat: a loop), else the output token limit."""
    return strip_control(error_message or "The reply was cut off: the model hit its output token limit.")


def reading_prompt_text(progress: PromptProgress) -> str:
    """The pill while a local server reads the prompt: "reading the prompt · 1,200 of 5,400
    tokens" (what the prompt cache gave is not read again, so it is not counted)."""
    text = f"reading the prompt · {progress.read:,} of {progress.to_read:,} tokens"
    return text + (f" ({progress.cache:,} cached)" if progress.cache > 0 else "")


def fmt_tokens(n: int | float) -> str:
    n = int(n or 0)
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.2f}M"


def fmt_cost(usd: float) -> str:
    if usd <= 0:
        return "$0"
    if usd < 0.01:
        return f"${usd:.4f}"
    if usd < 10:
        return f"${usd:.3f}"
    return f"${usd:.2f}"


def fmt_seconds(seconds: float, *, precise: bool = True) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s" if precise else f"{int(seconds)}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def fence_for(text: str, char: str = "`") -> str:
    """A code fence longer than any run of ``char`` in ``text`` (so ``text`` cannot
    close it early), at least three characters."""
    longest = 0
    run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return char * max(3, longest + 1)


# --- text the user must see as it is ------------------------------------------------------

# Invisible and text-direction characters: one rule for every field shown for approval and
# every view (tools/trust/approval.py); code shown for approval must look like the code that runs.
_INVISIBLE_RE = INVISIBLE_RE


def mark_invisible(html: str) -> str:
    """Escaped HTML (e.g. highlighted code) with each invisible character replaced by a
    marked-up ``⟨U+XXXX⟩`` (the characters are not HTML-special, so this is safe)."""
    return _INVISIBLE_RE.sub(lambda m: f'<span class="pi-invisible">⟨U+{ord(m.group(0)):04X}⟩</span>', html)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with lone surrogates (invalid in UTF-8) replaced by U+FFFD, so it can be
    written to a notebook file and sent over a comm."""
    return _SURROGATE_RE.sub("\ufffd", text)


_TICKED = re.compile(r"`([^`<>]{1,200})`")


def code_ticks(escaped: str) -> str:
    """Names in backticks as ``<code>`` in already escaped text (the review's lines: a name
    or a piece of code in backticks, e.g. "`df` changed in place")."""
    return _TICKED.sub(r"<code>\1</code>", escaped)

"""Assistant messages and models as the tests build them: one builder each.

A test names the fields its case is about; the rest keep ``AssistantMessage``'s and ``Model``'s
own defaults. A test module of one provider binds its wire names once::

    _assistant = functools.partial(assistant, api="anthropic-messages", provider="anthropic",
                                   model="claude-sonnet-4-5")
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pi_notebook.ai.types import AssistantContent, AssistantMessage, Model, StopReason, TextContent


def assistant(content: str | Iterable[AssistantContent] = (), *, stop: StopReason = "stop",
              **fields: Any) -> AssistantMessage:
    """An assistant message that ended with ``stop``; ``content`` a text or its blocks."""
    blocks = [TextContent(text=content)] if isinstance(content, str) else list(content)
    return AssistantMessage(content=blocks, stop_reason=stop, **fields)


def model(id: str = "m", *, api: str = "openai-completions", provider: str = "p", **fields: Any) -> Model:
    """A model that no catalogue holds: the fields a test sets, ``Model``'s defaults else."""
    return Model(id=id, api=api, provider=provider, **fields)

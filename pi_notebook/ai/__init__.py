"""The LLM layer: a port of pi-ai 0.85.1. No IPython imports.

Everyday names are re-exported here; wire-API adapters load lazily on the first
``stream()`` call so that importing the package stays cheap.
"""

from .abort import AbortController, AbortError, AbortSignal
from .event_stream import AssistantMessageEventStream, EventStream
from .models import (
                     UnknownModelError,
                     calculate_cost,
                     clamp_thinking_level,
                     get_model,
                     get_models,
                     get_providers,
                     get_supported_thinking_levels,
                     suggest_model_ids,
)
from .stream import (
                     complete,
                     complete_simple,
                     get_api_provider,
                     register_api_provider,
                     stream,
                     stream_simple,
                     unregister_api_providers,
)
from .types import (
                     AssistantMessage,
                     AssistantMessageEvent,
                     Context,
                     Cost,
                     ImageContent,
                     Message,
                     Model,
                     ModelCost,
                     StopReason,
                     TextContent,
                     ThinkingContent,
                     Tool,
                     ToolCall,
                     ToolResultMessage,
                     Usage,
                     UserMessage,
)

__all__ = [
    "AbortController", "AbortError", "AbortSignal", "AssistantMessageEventStream", "EventStream",
    "UnknownModelError", "calculate_cost", "clamp_thinking_level", "get_model", "get_models",
    "get_providers", "get_supported_thinking_levels", "suggest_model_ids", "complete",
    "complete_simple", "get_api_provider", "register_api_provider", "stream", "stream_simple",
    "unregister_api_providers", "AssistantMessage", "AssistantMessageEvent", "Context", "Cost",
    "ImageContent", "Message", "Model", "ModelCost", "StopReason", "TextContent", "ThinkingContent",
    "Tool", "ToolCall", "ToolResultMessage", "Usage", "UserMessage",
]

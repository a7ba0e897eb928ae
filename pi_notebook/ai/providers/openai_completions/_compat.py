"""Compat flags of the Chat Completions servers: pi's detection table (spec 5.6.3).

The servers that speak Chat Completions differ in what they accept (developer role,
``reasoning_effort``, ``store``, the max-tokens field...). ``detect_compat(model)`` guesses the
flags from the provider name and base URL; ``model.compat`` overrides them per key
(``get_compat``). The flag names are pi's camelCase names (listed in the package docstring).
"""

from __future__ import annotations

from typing import Any

from ...types import Model

__all__ = ["detect_compat", "get_compat"]

_LOCAL_PROVIDERS = {"ollama", "llamacpp", "llama.cpp", "vllm", "lmstudio", "llama-cpp", "local"}
_LOCAL_HOSTS = ("://localhost", "://127.", "://[::1]", "://0.0.0.0")


def _provider_flags(model: Model) -> dict[str, bool]:
    p = (model.provider or "").lower()
    url = (model.base_url or "").lower()
    flags = {
        "cerebras": p == "cerebras" or "cerebras.ai" in url,
        "xai": p == "xai" or "api.x.ai" in url,
        "together": p == "together" or "together.xyz" in url or "together.ai" in url,
        "chutes": p == "chutes" or "chutes.ai" in url,
        "deepseek": p == "deepseek" or "deepseek.com" in url,
        "zai": p.startswith("zai") or "api.z.ai" in url or "bigmodel.cn" in url,
        "moonshot": p.startswith("moonshot") or "moonshot.ai" in url or "moonshot.cn" in url,
        "opencode": p.startswith("opencode") or "opencode.ai" in url,
        "cloudflare": p.startswith("cloudflare") or "cloudflare.com" in url,
        "cloudflare_gateway": p == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in url,
        "nvidia": p == "nvidia" or "nvidia.com" in url,
        "ant_ling": p == "ant-ling",
        "openrouter": p == "openrouter" or "openrouter.ai" in url,
        "openai": p == "openai" or "api.openai.com" in url,
    }
    flags["local"] = p in _LOCAL_PROVIDERS or (any(h in url for h in _LOCAL_HOSTS)
                                              and not any(flags.values()))
    return flags


def detect_compat(model: Model) -> dict[str, Any]:
    """pi's auto-detection from provider name and base URL (spec 5.6.3).

    Not in pi: local servers (``ollama``, ``llamacpp``, ``vllm``, ``lmstudio`` or a loopback base
    URL) get what pi tells their users to set by hand (no developer role, no reasoning_effort),
    plus no ``store`` and the widely supported ``max_tokens`` field.
    """
    f = _provider_flags(model)
    model_id = model.id or ""
    non_standard = any(f[k] for k in ("nvidia", "cerebras", "xai", "together", "chutes", "deepseek",
                                      "zai", "moonshot", "opencode", "cloudflare", "ant_ling"))
    openrouter_native = f["openrouter"] and (model_id.startswith("anthropic/")
                                             or model_id.startswith("openai/"))
    max_tokens_legacy = any(f[k] for k in ("chutes", "deepseek", "moonshot", "cloudflare_gateway",
                                           "together", "nvidia", "ant_ling", "zai"))
    if f["deepseek"]:
        thinking_format = "deepseek"
    elif f["zai"]:
        thinking_format = "zai"
    elif f["together"]:
        thinking_format = "together"
    elif f["ant_ling"]:
        thinking_format = "ant-ling"
    elif f["openrouter"]:
        thinking_format = "openrouter"
    else:
        thinking_format = "openai"
    compat: dict[str, Any] = {
        "supportsStore": not non_standard,
        "supportsDeveloperRole": not non_standard and (not f["openrouter"] or openrouter_native),
        "supportsReasoningEffort": not any(f[k] for k in ("xai", "zai", "moonshot", "together",
                                                          "cloudflare_gateway", "nvidia", "ant_ling")),
        "supportsUsageInStreaming": True,
        "maxTokensField": "max_tokens" if max_tokens_legacy else "max_completion_tokens",
        "requiresToolResultName": False,
        "requiresAssistantAfterToolResult": False,
        "requiresThinkingAsText": False,
        "requiresReasoningContentOnAssistantMessages": f["deepseek"],
        "thinkingFormat": thinking_format,
        "supportsStrictMode": not any(f[k] for k in ("moonshot", "together", "cloudflare_gateway",
                                                     "nvidia")),
        "supportsFinishReason": True,
        "supportsLongCacheRetention": not any(f[k] for k in ("together", "cloudflare", "nvidia",
                                                             "ant_ling")),
        "sessionAffinityFormat": "openrouter" if f["openrouter"] else "openai",
        "sendSessionAffinityHeaders": False,
        "cacheControlFormat": "anthropic" if f["openrouter"] and model_id.startswith("anthropic/")
        else None,
        "thinkingBudgetField": None,
    }
    if f["local"]:
        compat.update(supportsDeveloperRole=False, supportsReasoningEffort=False,
                      supportsStore=False, maxTokensField="max_tokens")
    return compat


def get_compat(model: Model) -> dict[str, Any]:
    """Detected flags overridden, per key, by ``model.compat`` (``None`` values are ignored)."""
    compat = detect_compat(model)
    if model.compat:
        compat.update({k: v for k, v in model.compat.items() if v is not None})
    return compat

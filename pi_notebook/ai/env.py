"""API keys from the environment (spec 5.14, pi ``env-api-keys.ts``).

Keys are only ever *read* here and handed to the caller; nothing in this module prints,
logs or stores them. ``env`` (a mapping of overrides) wins over ``os.environ``; an empty
value counts as unset, as in pi.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["get_env_api_key", "find_env_keys", "env_var_names", "missing_key_message", "needs_api_key",
           "get_provider_env_value", "AUTHENTICATED", "KEYLESS_PROVIDERS"]

AUTHENTICATED = "<authenticated>"
"""Marker for ambient credentials (Vertex ADC, AWS); never sent as a key."""

KEYLESS_PROVIDERS = frozenset({"ollama", "llamacpp", "vllm", "lmstudio", "local", "faux", "openai-compatible"})

ANTHROPIC_AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"

_ENV_VARS: dict[str, tuple[str, ...]] = {
    # ANTHROPIC_AUTH_TOKEN is discoverable but never returned as an API key: it is a
    # bearer token for an Authorization header, not an x-api-key.
    "anthropic": (ANTHROPIC_AUTH_TOKEN_ENV, "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "github-copilot": ("COPILOT_GITHUB_TOKEN",),  # not GITHUB_TOKEN / GH_TOKEN
    "openai": ("OPENAI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "google": ("GEMINI_API_KEY",),
    "google-vertex": ("GOOGLE_CLOUD_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "nvidia": ("NVIDIA_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "zai-coding-cn": ("ZAI_CODING_CN_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "baseten": ("BASETEN_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "qwen-token-plan": ("QWEN_TOKEN_PLAN_API_KEY",),
    "qwen-token-plan-individual": ("QWEN_TOKEN_PLAN_API_KEY",),
    "qwen-token-plan-cn": ("QWEN_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
    "ant-ling": ("ANT_LING_API_KEY",),
    "radius": ("RADIUS_API_KEY",),
}

_AWS_SINGLE = ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
               "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


def get_provider_env_value(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """``env[name]`` if non-empty, else ``os.environ[name]`` if non-empty, else None."""
    if env:
        value = env.get(name)
        if value:
            return value
    return os.environ.get(name) or None


def env_var_names(provider: str) -> list[str]:
    """Variables that can hold a key for ``provider``, in lookup order (for messages).

    For Anthropic this is ``ANTHROPIC_OAUTH_TOKEN``, ``ANTHROPIC_API_KEY``: the auth-token
    variable is never used as a key, so it is not suggested either.
    """
    names = _ENV_VARS.get(provider, ())
    return [n for n in names if n != ANTHROPIC_AUTH_TOKEN_ENV]


def find_env_keys(provider: str, env: Mapping[str, str] | None = None) -> list[str] | None:
    """Names of the set variables that relate to ``provider``'s key (including
    ``ANTHROPIC_AUTH_TOKEN``, which is reported but not used as a key), or None."""
    found = [n for n in _ENV_VARS.get(provider, ()) if get_provider_env_value(n, env)]
    return found or None


def get_env_api_key(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key for ``provider`` from ``env`` overrides or the process environment.

    Anthropic: ``ANTHROPIC_OAUTH_TOKEN`` before ``ANTHROPIC_API_KEY``. Vertex AI with
    Application Default Credentials + project + location, and Amazon Bedrock with any
    AWS credential source, give the ``"<authenticated>"`` marker.
    """
    found = find_env_keys(provider, env)
    if found:
        usable = [n for n in found if n != ANTHROPIC_AUTH_TOKEN_ENV] if provider == "anthropic" else found
        if usable:
            return get_provider_env_value(usable[0], env)
    if provider == "google-vertex" and _has_vertex_adc(env):
        project = get_provider_env_value("GOOGLE_CLOUD_PROJECT", env) or get_provider_env_value("GCLOUD_PROJECT", env)
        if project and get_provider_env_value("GOOGLE_CLOUD_LOCATION", env):
            return AUTHENTICATED
    if provider == "amazon-bedrock" and (any(get_provider_env_value(n, env) for n in _AWS_SINGLE) or (
            get_provider_env_value("AWS_ACCESS_KEY_ID", env) and get_provider_env_value("AWS_SECRET_ACCESS_KEY", env))):
        return AUTHENTICATED
    return None


def _has_vertex_adc(env: Mapping[str, str] | None) -> bool:
    explicit = get_provider_env_value("GOOGLE_APPLICATION_CREDENTIALS", env)
    if explicit:
        return Path(explicit).expanduser().is_file()
    return (Path.home() / ".config" / "gcloud" / "application_default_credentials.json").is_file()


def needs_api_key(provider: str) -> bool:
    """Whether a request to ``provider`` should fail without a key.

    Local servers, the faux provider and custom OpenAI-compatible endpoints take an
    optional key; so does any provider this table does not know.
    """
    if provider in KEYLESS_PROVIDERS:
        return False
    return provider in _ENV_VARS or provider == "amazon-bedrock"


def missing_key_message(provider: str) -> str:
    """``No API key for provider: openai. Set OPENAI_API_KEY.`` (pi's text plus where to put the key)."""
    names = env_var_names(provider)
    if provider == "amazon-bedrock":
        hint = " Configure AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)."
    elif names:
        hint = " Set " + " or ".join(names) + "."
    else:
        hint = " Pass api_key."
    return f"No API key for provider: {provider}.{hint}"

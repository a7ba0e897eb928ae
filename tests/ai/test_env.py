"""API keys from the environment (spec 5.14, checklist 128)."""

from __future__ import annotations

import pytest

from pi_notebook.ai.env import (AUTHENTICATED, env_var_names, find_env_keys, get_env_api_key,
                                missing_key_message, needs_api_key)

_VARS = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN",
         "GITHUB_TOKEN", "GH_TOKEN", "COPILOT_GITHUB_TOKEN", "GEMINI_API_KEY", "GROQ_API_KEY",
         "GOOGLE_CLOUD_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT",
         "GOOGLE_CLOUD_LOCATION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
         "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
         "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "HOME"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no real gcloud ADC file


def test_plain_provider_keys(monkeypatch):
    assert get_env_api_key("openai") is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    assert get_env_api_key("openai") == "sk-test-openai"
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    assert get_env_api_key("google") == "g-key"
    assert get_env_api_key("unknown-provider") is None


def test_env_overrides_win_and_empty_values_count_as_unset(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-process")
    assert get_env_api_key("openai", {"OPENAI_API_KEY": "from-override"}) == "from-override"
    assert get_env_api_key("openai", {"OPENAI_API_KEY": ""}) == "from-process"
    monkeypatch.setenv("GROQ_API_KEY", "")
    assert get_env_api_key("groq") is None
    assert get_env_api_key("groq", {"GROQ_API_KEY": "scoped"}) == "scoped"


def test_copilot_uses_only_copilot_github_token(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-not-a-copilot-key")
    monkeypatch.setenv("GH_TOKEN", "gh-not-either")
    assert get_env_api_key("github-copilot") is None
    monkeypatch.setenv("COPILOT_GITHUB_TOKEN", "copilot-key")
    assert get_env_api_key("github-copilot") == "copilot-key"


def test_anthropic_auth_token_is_reported_but_never_returned(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "bearer-token")
    assert find_env_keys("anthropic") == ["ANTHROPIC_AUTH_TOKEN"]
    assert get_env_api_key("anthropic") is None


def test_anthropic_oauth_token_takes_precedence_over_api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "bearer-token")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api")
    assert get_env_api_key("anthropic") == "sk-ant-api"  # the fallback
    monkeypatch.setenv("ANTHROPIC_OAUTH_TOKEN", "sk-ant-oat-oauth")
    assert get_env_api_key("anthropic") == "sk-ant-oat-oauth"


def test_vertex_adc_needs_credentials_project_and_location(monkeypatch, tmp_path):
    creds = tmp_path / "adc.json"
    creds.write_text("{}")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    assert get_env_api_key("google-vertex") is None
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    assert get_env_api_key("google-vertex") == AUTHENTICATED
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    assert get_env_api_key("google-vertex") is None
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "vertex-key")
    assert get_env_api_key("google-vertex") == "vertex-key"


def test_bedrock_marker_for_any_aws_credential_source(monkeypatch):
    assert get_env_api_key("amazon-bedrock") is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    assert get_env_api_key("amazon-bedrock") is None  # needs the secret too
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert get_env_api_key("amazon-bedrock") == AUTHENTICATED
    assert get_env_api_key("amazon-bedrock", None) == AUTHENTICATED
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert get_env_api_key("amazon-bedrock", {"AWS_PROFILE": "dev"}) == AUTHENTICATED


def test_env_var_names_and_messages():
    assert env_var_names("openai") == ["OPENAI_API_KEY"]
    assert env_var_names("anthropic") == ["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"]
    assert env_var_names("ollama") == []
    assert missing_key_message("openai") == "No API key for provider: openai. Set OPENAI_API_KEY."
    assert missing_key_message("anthropic").startswith("No API key for provider: anthropic. Set ANTHROPIC_OAUTH_TOKEN or")
    assert missing_key_message("mystery").startswith("No API key for provider: mystery.")


@pytest.mark.parametrize("provider", ["ollama", "llamacpp", "vllm", "lmstudio", "local", "faux", "openai-compatible",
                                      "some-custom-server"])
def test_local_and_unknown_providers_need_no_key(provider):
    assert not needs_api_key(provider)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google", "openrouter", "groq", "xai", "mistral",
                                      "deepseek", "github-copilot", "amazon-bedrock"])
def test_cloud_providers_need_a_key(provider):
    assert needs_api_key(provider)

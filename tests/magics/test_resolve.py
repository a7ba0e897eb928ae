import socket
import time

import pytest
from IPython.core.error import UsageError

from pi_notebook.magics import resolve
from pi_notebook.magics.resolve import NO_MODEL_MESSAGE, probe_local_servers, resolve_model


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
    for _, names, _ in resolve.CLOUD_DEFAULTS:
        for name in names:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(resolve, "LOCAL_SERVERS", [("ollama", _free_port())])
    monkeypatch.setattr(resolve, "_embedded_model", lambda: None)
    monkeypatch.setattr(resolve, "_env_key_set", lambda provider, names: False)


def test_nothing_configured_gives_one_line_help(no_sources):
    with pytest.raises(UsageError) as info:
        resolve_model()
    text = str(info.value)
    assert text == NO_MODEL_MESSAGE
    assert "\n" not in text and "faux/" in text and "OPENAI_API_KEY" in text


def test_cloud_key_picks_first_provider(no_sources, monkeypatch):
    looked_up = []
    monkeypatch.setattr(resolve, "_env_key_set", lambda provider, names: provider in ("openai", "google"))
    monkeypatch.setattr(resolve, "_lookup", lambda spec, base_url: looked_up.append(spec) or _Model(spec))
    resolved = resolve_model()
    assert looked_up == ["openai/gpt-4.1"]
    assert resolved.source == "cloud"
    assert "key from environment" in resolved.label


def test_explicit_beats_configured(no_sources, monkeypatch):
    monkeypatch.setattr(resolve, "_lookup", lambda spec, base_url: _Model(spec))
    assert resolve_model("a/x", "b/y").source == "explicit"
    assert resolve_model(None, "b/y").model.id == "y"


def test_local_server_is_used_when_no_key(no_sources, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    monkeypatch.setattr(resolve, "LOCAL_SERVERS", [("ollama", _free_port()), ("llamacpp", port)])
    monkeypatch.setattr(resolve, "_served_model_id", lambda host, p, timeout=1.0: "qwen-test")
    try:
        resolved = resolve_model()
    finally:
        listener.close()
    assert resolved.source == "local-server"
    assert resolved.model.id == "qwen-test"
    assert resolved.model.base_url == f"http://127.0.0.1:{port}/v1"
    assert resolved.model.provider == "llamacpp"


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


class _Model:
    def __init__(self, spec):
        self.provider, self.id = spec.split("/", 1)
        self.base_url = ""


def test_embedded_model_when_installed_and_nothing_else(no_sources, monkeypatch):
    from pi_notebook.ai.providers import local

    monkeypatch.setattr(resolve, "_embedded_model", _real_embedded)  # undo the fixture's stub
    monkeypatch.setattr(local, "local_model_available", lambda *a, **k: True)
    resolved = resolve_model()
    assert resolved.source == "embedded"
    assert resolved.model.provider == "local"
    assert resolved.label.endswith("(embedded)")

from __future__ import annotations

import pytest

from pi_notebook.tools.trust.redact import REDACTED, redact, redact_data, secret_values, split_unsafe_tail

CANARY = "sk-canary-0123456789abcdef"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MY_SERVICE_API_KEY", CANARY)
    return CANARY


def test_secret_values_are_replaced(secret_env: str) -> None:
    assert redact(f"key={secret_env}; again {secret_env}") == f"key={REDACTED}; again {REDACTED}"


def test_names_and_lengths_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "short")  # under 8 characters: not a secret
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("client_secret", "abcdefgh12345")  # any case
    monkeypatch.setenv("HOME_DIR_NAME", "not-a-secret-value")
    text = "short hunter2hunter2 abcdefgh12345 not-a-secret-value"
    assert redact(text) == f"short {REDACTED} {REDACTED} not-a-secret-value"


def test_matcher_follows_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert redact("value-one-123") == "value-one-123"
    monkeypatch.setenv("X_TOKEN", "value-one-123")
    assert redact("value-one-123") == REDACTED
    monkeypatch.setenv("X_TOKEN", "value-two-456")
    assert redact("value-one-123 value-two-456") == f"value-one-123 {REDACTED}"
    monkeypatch.delenv("X_TOKEN")
    assert redact("value-two-456") == "value-two-456"


def test_escaped_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIRD_KEY", 'ab"c\\d\'efgh')
    value = 'ab"c\\d\'efgh'
    assert REDACTED in redact(repr(value))
    import json

    assert REDACTED in redact(json.dumps({"k": value}))
    assert value not in redact(f"x {value} y")


def test_redact_data_walks_structures(secret_env: str) -> None:
    data = {"text/plain": f"<{secret_env}>", "application/json": {"a": [secret_env, 1]}}
    out = redact_data(data)
    assert out == {"text/plain": f"<{REDACTED}>", "application/json": {"a": [REDACTED, 1]}}
    assert data["text/plain"] == f"<{secret_env}>"  # input untouched


def test_split_unsafe_tail_holds_secret_prefix(secret_env: str) -> None:
    safe, held = split_unsafe_tail("hello " + secret_env[:5])
    assert (safe, held) == ("hello ", secret_env[:5])
    assert split_unsafe_tail("hello world") == ("hello world", "")
    # A stream split anywhere never shows a recognisable part of the secret.
    text = f"before {secret_env} after"
    for cut_at in range(len(text)):
        shown, held = split_unsafe_tail(redact(text[:cut_at]))
        rest = redact(held + text[cut_at:])
        assert shown + rest == f"before {REDACTED} after"


def test_no_secrets_is_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if any(k in name.upper() for k in ("KEY", "TOKEN", "SECRET", "PASSWORD")):
            monkeypatch.delenv(name)
    assert secret_values() == ()
    assert redact("anything") == "anything"
    assert split_unsafe_tail("anything") == ("anything", "")


def test_strip_unsafe_head(secret_env: str) -> None:
    from pi_notebook.tools.trust.redact import strip_unsafe_head

    assert strip_unsafe_head(secret_env[-7:] + " rest") == " rest"
    assert strip_unsafe_head("plain start") == "plain start"

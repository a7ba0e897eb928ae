"""Provider error text (spec 5.3, item 130) and overflow detection (spec 5.15, item 131)."""

from __future__ import annotations

import pytest

from pi_notebook.ai.errors import (describe_provider_error, format_provider_error, is_context_overflow,
                                   is_recoverable_length, normalize_provider_error, truncate_error_text)
from pi_notebook.ai.types import AssistantMessage, Usage


class SdkError(Exception):
    """An exception carrying whatever attributes a client put on it."""

    def __init__(self, message, **attrs):
        super().__init__(message)
        for key, value in attrs.items():
            setattr(self, key, value)


class Response:
    def __init__(self, status_code, text=None, unread=False):
        self.status_code = status_code
        self._text, self._unread = text, unread

    @property
    def text(self):
        if self._unread:
            raise RuntimeError("Attempted to access streaming response content, without having called `read()`.")
        return self._text


def test_status_code_and_string_body_shape():
    norm = normalize_provider_error(SdkError("Bad Request", status_code=400, body='{"detail":"bad tool"}'))
    assert (norm.status, norm.body, norm.message_carries_body) == (400, '{"detail":"bad tool"}', False)
    assert norm.format() == '400: {"detail":"bad tool"}'
    assert norm.format("Mistral API error") == 'Mistral API error (400): {"detail":"bad tool"}'


def test_parsed_error_object_shape_is_json_stringified():
    err = SdkError("403 status code (no body)", status=403, error={"message": "blocked by gateway", "code": 1})
    assert describe_provider_error(err) == '403: {"message":"blocked by gateway","code":1}'
    assert describe_provider_error(err, "OpenAI API error") == \
        'OpenAI API error (403): {"message":"blocked by gateway","code":1}'


def test_message_that_already_carries_the_body_is_kept():
    body = '{"error":{"message":"overloaded"}}'
    err = SdkError(f"529 {body}", status=529, body=body)
    assert describe_provider_error(err) == f"529 {body}"
    assert describe_provider_error(err, "Anthropic") == f"Anthropic (529): 529 {body}"


def test_response_object_shape_and_unread_streams_are_ignored():
    assert describe_provider_error(SdkError("boom", response=Response(502, "Bad gateway html"))) == "502: Bad gateway html"
    unread = SdkError("Server error 500", response=Response(500, unread=True))
    assert describe_provider_error(unread) == "Server error 500"


def test_class_instances_and_empty_bodies_are_not_bodies():
    class Wrapper(dict):
        pass

    assert describe_provider_error(SdkError("real message", status=400, error=Wrapper(a=1))) == "real message"
    assert describe_provider_error(SdkError("real message", status=400, error={})) == "real message"
    assert describe_provider_error(SdkError("real message", status=400, body="   ")) == "real message"
    assert describe_provider_error(SdkError("no status", body="some body")) == "no status"


def test_body_truncated_at_4000_characters():
    body = "x" * 4500
    norm = normalize_provider_error(SdkError("err", status=500, body=body))
    assert norm.body == "x" * 4000 + "... [truncated 500 chars]"
    assert format_provider_error(500, body, "err") == "500: " + "x" * 4000 + "... [truncated 500 chars]"
    assert format_provider_error(500, norm.body, "err") == "500: " + norm.body  # not cut twice
    assert truncate_error_text("short") == "short"


def test_format_provider_error_rules():
    assert format_provider_error(None, "body", "msg") == "msg"
    assert format_provider_error(404, None, "msg") == "msg"
    assert format_provider_error(404, None, "msg", "OpenAI API error") == "OpenAI API error (404): msg"
    assert format_provider_error(None, None, "msg", "P") == "msg"
    assert format_provider_error(429, "slow down", "Rate limited: slow down") == "Rate limited: slow down"
    assert format_provider_error(429, "slow down", "429") == "429: slow down"


def test_non_exceptions_become_json_text():
    assert normalize_provider_error({"weird": True}).message == '{"weird":true}'
    assert normalize_provider_error("plain").message == "plain"


# --- overflow ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "prompt is too long: 213462 tokens > 200000 maximum",
    '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
    "Your input exceeds the context window of this model",
    "Requested token count exceeds the model's maximum context length of 131072 tokens",
    "Input length (265330) exceeds model's maximum context length (262144).",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
    "Please reduce the length of the messages or completion",
    "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
    "Input length 9000 exceeds the maximum allowed input length of 8192 tokens.",
    "The input (9000 tokens) is longer than the model's context length (8192 tokens).",
    "the request exceeds the available context size, try increasing it",
    "tokens to keep from the initial prompt is greater than the context length",
    "prompt token count of 9000 exceeds the limit of 8192",
    "invalid params, context window exceeds limit",
    "Your request exceeded model token limit: 9000 (requested: 9100)",
    "Prompt has 9,000 tokens, but the configured context size is 8,192 tokens",
    "Prompt contains 9000 tokens ... too large for model with 8192 maximum context length",
    "prompt too long; exceeded max context length by 12 tokens",
    "Range of input length should be [1, 30720]",
    "context_length_exceeded",
    "400 status code (no body)",
    "413 (no body)",
])
def test_provider_overflow_messages_are_detected(text):
    msg = AssistantMessage(stop_reason="error", error_message=text)
    assert is_context_overflow(msg)
    assert is_context_overflow(text)
    assert is_context_overflow(msg.model_dump())


@pytest.mark.parametrize("text", [
    "ThrottlingException: Too many tokens, please wait before trying again.".replace(
        "ThrottlingException", "Throttling error"),
    "Rate limit reached: too many tokens per minute",
    "429 Too Many Requests: too many tokens",
    "Service unavailable: token limit exceeded, retry later",
    "Internal server error",
    "500 status code (no body)",
])
def test_throttling_and_unrelated_errors_are_not_overflow(text):
    assert not is_context_overflow(AssistantMessage(stop_reason="error", error_message=text))


def test_overflow_text_on_a_non_error_stop_does_not_count():
    assert not is_context_overflow(AssistantMessage(stop_reason="stop", error_message="prompt is too long"))


def test_silent_overflow_and_length_stop_overflow():
    ok = AssistantMessage(stop_reason="stop", usage=Usage(input=90_000, cache_read=20_000))
    assert is_context_overflow(ok, 100_000)
    assert not is_context_overflow(ok, 200_000)
    assert not is_context_overflow(ok)
    filled = AssistantMessage(stop_reason="length", usage=Usage(input=99_000, output=0))
    assert is_context_overflow(filled, 100_000)
    assert not is_context_overflow(filled.model_copy(update={"usage": Usage(input=50_000)}), 100_000)
    assert not is_context_overflow(AssistantMessage(stop_reason="length", usage=Usage(input=99_500, output=5)),
                                   100_000)


def test_recoverable_length():
    short = AssistantMessage(stop_reason="length", usage=Usage(output=300))
    assert is_recoverable_length(short, 4096)
    assert not is_recoverable_length(short, 300)
    assert not is_recoverable_length(short, 0)
    assert not is_recoverable_length(AssistantMessage(stop_reason="stop", usage=Usage(output=3)), 4096)


def test_format_provider_error_also_takes_an_exception_like_pi():
    err = SdkError("Bad Request", status=400, body='{"error":"x"}')
    assert format_provider_error(err) == '400: {"error":"x"}'
    assert format_provider_error(err, "OpenAI API error") == 'OpenAI API error (400): {"error":"x"}'
    norm = normalize_provider_error(err)
    assert format_provider_error(norm, prefix="P") == 'P (400): {"error":"x"}'
    carried = SdkError('400: {"error":"x"}', status=400, body='{"error":"x"}')
    assert format_provider_error(carried, "OpenAI API error") == 'OpenAI API error (400): 400: {"error":"x"}'
    with pytest.raises(TypeError):
        format_provider_error(400, "body")


def test_a_dropped_connection_says_what_happened_and_what_to_do_first():
    from pi_notebook.ai.errors import connection_lost_text, embedded_server_lost_text

    technical = ("Connection to api.example.com lost while reading the response: peer closed connection "
                 "without sending complete message body (incomplete chunked read)")
    remote = connection_lost_text("api.example.com", technical)
    assert remote.startswith("The connection to the model provider (api.example.com) dropped while it was answering")
    assert remote.index("retry") < remote.index("Technical detail: ") < remote.index("incomplete chunked read")
    local = connection_lost_text("127.0.0.1:54403", technical.replace("api.example.com", "127.0.0.1:54403"))
    assert local.startswith("The model server on this machine (127.0.0.1:54403) stopped while answering")
    embedded = embedded_server_lost_text(local)
    assert embedded.startswith("The local model server stopped while answering; it starts again with the next request")
    assert embedded.endswith("(incomplete chunked read)") and "Technical detail: Connection to 127.0.0.1:54403" in embedded
    assert embedded_server_lost_text("400: bad request") == "400: bad request"  # other errors keep their text

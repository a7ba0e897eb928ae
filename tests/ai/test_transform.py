"""Cross-provider message conversion (spec 5.5, checklist 124) and id normalisers."""

from __future__ import annotations

import copy
import functools

import pytest
from helpers.messages import assistant

from pi_notebook.ai.transform import (NO_RESULT_TEXT, TOOL_IMAGE_PLACEHOLDER, USER_IMAGE_PLACEHOLDER,
                                      normalize_anthropic_tool_call_id, normalize_google_tool_call_id,
                                      normalize_openai_completions_tool_call_id, sanitize_surrogates,
                                      short_hash, transform_messages)
from pi_notebook.ai.types import (AssistantMessage, ImageContent, Model, TextContent, ThinkingContent, ToolCall,
                                  ToolResultMessage, UserMessage)

TARGET = Model(id="claude-sonnet-4-5", api="anthropic-messages", provider="anthropic", input=["text", "image"])
TEXT_ONLY = Model(id="llama", api="openai-completions", provider="ollama", input=["text"])


_assistant = functools.partial(assistant, provider="openai", api="openai-responses", model="gpt-5", timestamp=2)


def _same(content, stop="stop"):
    return _assistant(content, provider=TARGET.provider, api=TARGET.api, model=TARGET.id, stop=stop)


def _result(call_id, name="ls", text="ok"):
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=3)


def _img():
    return ImageContent(data="aGk=", mime_type="image/png")


# --- thinking, text and tool calls --------------------------------------------------------------

def test_thinking_from_another_model_becomes_plain_text_without_tags():
    out = transform_messages([_assistant([ThinkingContent(thinking="let me think", thinking_signature="sig"),
                                          TextContent(text="answer", text_signature="msg_1")])], TARGET)
    assert [b.model_dump() for b in out[0].content] == [{"type": "text", "text": "let me think"},
                                                       {"type": "text", "text": "answer"}]


def test_same_model_keeps_thinking_signatures_and_text_signatures():
    blocks = [ThinkingContent(thinking="", thinking_signature="opaque"), ThinkingContent(thinking="plain"),
              TextContent(text="x", text_signature="sig")]
    out = transform_messages([_same(blocks)], TARGET)
    assert out[0].content == blocks


def test_redacted_thinking_only_survives_for_the_same_model():
    redacted = ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="enc", redacted=True)
    assert transform_messages([_same([redacted])], TARGET)[0].content == [redacted]
    assert transform_messages([_assistant([redacted])], TARGET)[0].content == []


def test_empty_or_whitespace_thinking_is_dropped():
    for msg in (_assistant([ThinkingContent(thinking="  \n"), TextContent(text="t")]),
                _same([ThinkingContent(thinking=" "), TextContent(text="t")])):
        out = transform_messages([msg], TARGET)
        assert [b.type for b in out[0].content] == ["text"]


def test_same_model_requires_provider_api_and_id():
    for kw in ({"provider": "other"}, {"api": "openai-completions"}, {"model": "claude-haiku-4-5"}):
        params = {"provider": TARGET.provider, "api": TARGET.api, "model": TARGET.id, **kw}
        msg = _assistant([ThinkingContent(thinking="t", thinking_signature="s")], **params)
        assert transform_messages([msg], TARGET)[0].content == [TextContent(text="t")]


def test_migrated_tool_calls_lose_thought_signature_and_get_normalised_ids_mapped_to_results():
    call = ToolCall(id="call_abc|fc+123/x", name="ls", arguments={"p": "."}, thought_signature="gsig")
    messages = [UserMessage(content="go", timestamp=1), _assistant([call]), _result("call_abc|fc+123/x")]
    out = transform_messages(messages, TARGET, normalize_anthropic_tool_call_id)
    migrated = out[1].content[0]
    assert migrated.id == "call_abc_fc_123_x" and migrated.thought_signature is None
    assert migrated.arguments == {"p": "."}
    assert out[2].tool_call_id == "call_abc_fc_123_x"
    assert len(out) == 3  # answered: no synthetic result


def test_same_model_tool_calls_are_not_renamed():
    call = ToolCall(id="weird|id", name="ls", thought_signature="keep")
    out = transform_messages([_same([call]), _result("weird|id")], TARGET, normalize_anthropic_tool_call_id)
    assert out[0].content[0] is call and out[1].tool_call_id == "weird|id"


# --- second pass ---------------------------------------------------------------------------------

def test_error_and_aborted_assistants_are_dropped():
    messages = [UserMessage(content="a", timestamp=1), _assistant([TextContent(text="partial")], stop="error"),
                _assistant([TextContent(text="cut")], stop="aborted"), UserMessage(content="b", timestamp=4)]
    out = transform_messages(messages, TARGET)
    assert [m.role for m in out] == ["user", "user"]


def test_trailing_orphaned_tool_call_gets_a_synthetic_result_with_the_normalised_id():
    calls = [ToolCall(id="c|1", name="read"), ToolCall(id="c|2", name="grep")]
    messages = [UserMessage(content="go", timestamp=1), _assistant(calls), _result("c|1", "read")]
    out = transform_messages(messages, TARGET, normalize_anthropic_tool_call_id)
    assert [m.role for m in out] == ["user", "assistant", "toolResult", "toolResult"]
    synthetic = out[3]
    assert synthetic.tool_call_id == "c_2" and synthetic.tool_name == "grep" and synthetic.is_error
    assert synthetic.content == [TextContent(text=NO_RESULT_TEXT)]


def test_orphans_are_answered_before_the_next_user_or_assistant_message():
    messages = [_same([ToolCall(id="a", name="x")]), UserMessage(content="interrupt", timestamp=5),
                _same([ToolCall(id="b", name="y")]), _same([TextContent(text="next")])]
    out = transform_messages(messages, TARGET)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in out] == [
        ("assistant", None), ("toolResult", "a"), ("user", None),
        ("assistant", None), ("toolResult", "b"), ("assistant", None)]


def test_tool_calls_of_a_dropped_assistant_get_no_synthetic_result():
    out = transform_messages([_assistant([ToolCall(id="z", name="x")], stop="aborted"),
                              UserMessage(content="again", timestamp=9)], TARGET)
    assert [m.role for m in out] == ["user"]


# --- content normalisation and images -----------------------------------------------------------

def test_null_or_missing_content_becomes_empty_list_for_dict_messages():
    raw = [{"role": "user", "content": None, "timestamp": 1},
           {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
            "stopReason": "stop", "timestamp": 2},
           {"role": "toolResult", "toolCallId": "x", "toolName": "t", "content": None, "isError": False,
            "timestamp": 3}]
    snapshot = copy.deepcopy(raw)
    out = transform_messages(raw, TARGET)
    assert out[0].content == [] and out[1].content == [] and out[2].content == []
    assert raw == snapshot


def test_images_are_replaced_for_text_only_models_one_placeholder_per_run():
    user = UserMessage(content=[TextContent(text="look"), _img(), _img(), TextContent(text="and"), _img()], timestamp=1)
    tool = ToolResultMessage(tool_call_id="c", tool_name="shot", content=[_img(), _img()], timestamp=3)
    out = transform_messages([user, _same([ToolCall(id="c", name="shot")]), tool], TEXT_ONLY)
    assert [b.text for b in out[0].content] == ["look", USER_IMAGE_PLACEHOLDER, "and", USER_IMAGE_PLACEHOLDER]
    assert [b.text for b in out[2].content] == [TOOL_IMAGE_PLACEHOLDER]
    assert user.content[1].type == "image"  # caller untouched
    kept = transform_messages([user], TARGET)
    assert kept[0] is user


def test_existing_placeholder_text_counts_as_the_previous_placeholder():
    user = UserMessage(content=[TextContent(text=USER_IMAGE_PLACEHOLDER), _img()], timestamp=1)
    out = transform_messages([user], TEXT_ONLY)
    assert [b.text for b in out[0].content] == [USER_IMAGE_PLACEHOLDER]


def test_callers_messages_are_never_mutated():
    call = ToolCall(id="x|y", name="ls", thought_signature="s")
    thinking = ThinkingContent(thinking="hmm", thinking_signature="sig")
    messages = [_assistant([thinking, call]), _result("x|y")]
    snapshot = [m.model_dump() for m in messages]
    transform_messages(messages, TARGET, normalize_anthropic_tool_call_id)
    assert [m.model_dump() for m in messages] == snapshot


def test_custom_roles_pass_through():
    custom = {"role": "notebookCell", "source": "x = 1"}
    assert transform_messages([custom], TARGET) == [custom]


# --- id normalisers -------------------------------------------------------------------------------

def test_anthropic_normaliser():
    assert normalize_anthropic_tool_call_id("call_1|fc/2+=") == "call_1_fc_2__"
    assert len(normalize_anthropic_tool_call_id("x" * 100)) == 64


def test_openai_completions_normaliser():
    openai = Model(id="gpt-4.1", api="openai-completions", provider="openai")
    groq = Model(id="llama", api="openai-completions", provider="groq")
    assert normalize_openai_completions_tool_call_id("call_abc|fc_123", openai) == "call_abc_fc_123"
    assert normalize_openai_completions_tool_call_id("call_abc|", groq) == "call_abc"
    long_id = "call_9f8e7d6c5b4a39281706f5e4d3c2b1a0|fc_" + "x" * 400
    out = normalize_openai_completions_tool_call_id(long_id, openai)
    assert len(out) <= 40 and out == "call_9f8e7d6c5b4a39281706f5e4d3_s1b62y10"  # 31-char prefix + pi shortHash[:8]
    assert normalize_openai_completions_tool_call_id("y" * 50, openai) == "y" * 40
    assert normalize_openai_completions_tool_call_id("y" * 50, groq) == "y" * 50


def test_short_hash_matches_pi():
    # values computed with pi-ai 0.85.1 utils/hash.js under node
    assert short_hash("") == "k4n83c7h0j2b"
    assert short_hash("call_abc|fc_123") == "jp01dsxufnom"
    assert short_hash("é😀") == "102l7zrk951la"


@pytest.mark.parametrize("model_id,expected", [
    ("gemini-2.5-flash", "a|b"), ("gemini-3-pro-preview", "a_b"), ("claude-sonnet-4-5", "a_b"),
    ("gpt-oss-120b", "a_b"), ("gemini-live-3-flash", "a_b"),
])
def test_google_normaliser_only_when_ids_are_required(model_id, expected):
    model = Model(id=model_id, api="google-generative-ai", provider="google")
    assert normalize_google_tool_call_id("a|b", model) == expected


# --- surrogates -------------------------------------------------------------------------------------

def test_sanitize_surrogates():
    assert sanitize_surrogates("Hello 🙈 World") == "Hello 🙈 World"
    assert sanitize_surrogates("Text \ud83d here") == "Text  here"
    assert sanitize_surrogates("low \ude48 only") == "low  only"
    paired = "\ud83d\ude48"  # a proper pair as produced by surrogatepass decoding
    assert sanitize_surrogates(f"a{paired}b") == f"a{paired}b"
    assert sanitize_surrogates("\ud83d\ud83d\ude48") == "\ud83d\ude48"


def test_matches_pi_on_a_mixed_transcript():
    """``data/transform_golden.json``: a transcript run through pi-ai 0.85.1's own
    ``dist/api/transform-messages.js`` (node) for a text-only target with the Anthropic
    id rule; synthetic results' timestamps are zeroed on both sides."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).parent / "data" / "transform_golden.json").read_text())
    out = transform_messages(doc["messages"], Model.model_validate(doc["model"]), normalize_anthropic_tool_call_id)
    dumped = [m.model_dump() for m in out]
    for m in dumped:
        if m["role"] == "toolResult" and m["timestamp"] > 1000:
            m["timestamp"] = 0
    assert dumped == doc["expected"]


def test_objects_with_a_pi_role_are_read_by_attribute():
    class Note:
        role = "user"
        content = None
        timestamp = 7

    class Reply:
        role = "assistant"
        content = [ThinkingContent(thinking="t")]
        provider, api, model, stop_reason, timestamp = "x", "y", "z", "stop", 8

    out = transform_messages([Note(), Reply()], TARGET)
    assert isinstance(out[0], UserMessage) and out[0].content == [] and out[0].timestamp == 7
    assert isinstance(out[1], AssistantMessage) and out[1].content == [TextContent(text="t")]

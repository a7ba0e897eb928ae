"""The pure SSE decoder: framing rules and arbitrary chunk boundaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_notebook.ai._sse import SSEDecoder, SSEEvent

FIXTURES = Path("/work/shared/fixtures/openai-compatible")


def decode(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.flush())
    return events


def simple(events: list[SSEEvent]) -> list[tuple[str, str, str | None]]:
    return [(e.event, e.data, e.id) for e in events]


def test_basic_data_events_and_defaults():
    events = decode(b'data: {"a":1}\n\ndata: two\n\n')
    assert simple(events) == [("message", '{"a":1}', None), ("message", "two", None)]


def test_multiline_data_event_name_and_id():
    events = decode(b"event: delta\nid: 7\ndata: one\ndata:two\ndata\n\nevent: x\n\ndata: after\n\n")
    assert simple(events) == [("delta", "one\ntwo\n", "7"), ("message", "after", "7")]


def test_event_without_data_is_not_dispatched_and_type_resets():
    assert simple(decode(b"event: ping\n\ndata: x\n\n")) == [("message", "x", None)]


def test_comments_and_unknown_fields_are_ignored():
    body = b": ping - 2026-11-29\n:\nfoo: bar\ndata: x\nretry: 1500\n\n"
    events = decode(body)
    assert simple(events) == [("message", "x", None)]
    assert events[0].retry == 1500


def test_only_one_leading_space_is_stripped():
    assert decode(b"data:  two spaces\n\n")[0].data == " two spaces"
    assert decode(b"data:none\n\n")[0].data == "none"


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes):
    body = b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert [e.data for e in decode(body)] == ["a\nb", "c"]


def test_crlf_split_across_chunks_is_one_line_end():
    # "\r" ends one chunk and "\n" starts the next: still a single line terminator.
    events = decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")
    assert [e.data for e in events] == ["a\nb"]


def test_lone_cr_then_blank_line_across_chunks():
    events = decode(b"data: a\r", b"\r")
    assert [e.data for e in events] == ["a"]


def test_utf8_split_inside_a_sequence():
    body = 'data: {"t":"héllo 🌍 世界"}\n\n'.encode()
    for cut in range(1, len(body)):
        events = decode(body[:cut], body[cut:])
        assert [json.loads(e.data)["t"] for e in events] == ["héllo 🌍 世界"], cut


def test_field_name_split_and_single_bytes():
    body = b"event: tool\ndata: x\n\n"
    assert simple(decode(*[body[i:i + 1] for i in range(len(body))])) == [("tool", "x", None)]


def test_event_without_its_blank_line_at_eof_is_discarded():
    # WHATWG: "If the file ends in the middle of an event, before the final empty line, the
    # incomplete event is not dispatched." A cut stream must not pass for a whole last event.
    assert decode(b"data: last") == []
    assert decode(b"data: a\ndata: b\n") == []
    assert [e.data for e in decode(b"data: a\n\ndata: b\n")] == ["a"]


def test_bom_is_stripped_once():
    assert [e.data for e in decode(b"\xef\xbb\xbfdata: x\n\n")] == ["x"]


def test_invalid_utf8_is_replaced_not_fatal():
    assert decode(b"data: \xff\xfe ok\n\n")[0].data == "\ufffd\ufffd ok"


def test_id_with_nul_is_ignored():
    events = decode(b"id: 1\ndata: a\n\nid: bad\0\ndata: b\n\n")
    assert [e.id for e in events] == ["1", "1"]


def test_long_line_in_many_small_chunks():
    payload = "x" * 200_000
    body = f"data: {payload}\n\n".encode()
    events = decode(*[body[i:i + 100] for i in range(0, len(body), 100)])
    assert len(events) == 1 and events[0].data == payload


def reference_events(text: str) -> list[tuple[str, str, str | None]]:
    """A deliberately naive whole-text implementation to compare the incremental one against."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out, data, event, last_id = [], [], "", None
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if line == "":
            if last:
                break
            if data:
                out.append((event or "message", "\n".join(data), last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _sep, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    if data:
        out.append((event or "message", "\n".join(data), last_id))
    return out


line_st = st.one_of(
    st.builds(lambda v: f"data: {v}", st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8)),
    st.builds(lambda v: f"data:{v}", st.text(alphabet="ab é🌍:", max_size=5)),
    st.builds(lambda v: f"event: {v}", st.sampled_from(["a", "delta", "x y"])),
    st.builds(lambda v: f"id: {v}", st.sampled_from(["1", "abc"])),
    st.just(": comment"),
    st.just(""),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(line_st, max_size=12),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_chunking_matches_the_reference(lines, eol, cuts):
    text = eol.join(lines) + eol + eol
    body = text.encode("utf-8")
    points = sorted({c for c in cuts if c < len(body)})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert simple(decode(*chunks)) == reference_events(text)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.sse")), ids=lambda p: p.name)
def test_captured_fixtures_decode_identically_in_any_chunk_size(path: Path):
    body = path.read_bytes()
    whole = simple(decode(body))
    assert whole, "every captured stream has at least one event"
    for size in (1, 2, 3, 7, 64, 1000):
        assert simple(decode(*[body[i:i + size] for i in range(0, len(body), size)])) == whole
    for event in whole:
        if event[1] != "[DONE]":
            json.loads(event[1])  # every data payload in the captures is a JSON document


def test_data_only_mode_yields_the_same_payloads():
    body = b"event: x\nid: 3\ndata: a\ndata: b\n\n: c\ndata: {\"k\": 1}\r\n\r\ndata: tail"
    full = SSEDecoder()
    events = full.feed(body) + full.flush()
    fast = SSEDecoder(data_only=True)
    datas = []
    for i in range(0, len(body), 5):
        datas += fast.feed(body[i:i + 5])
    datas += fast.flush()
    assert datas == [e.data for e in events] == ["a\nb", '{"k": 1}']  # "tail" has no blank line

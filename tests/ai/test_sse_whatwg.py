"""The SSE decoder follows the WHATWG event-stream interpretation to the letter, however chunks split.

``reference_events`` below is a line-by-line transcription of the standard's algorithm
("Interpreting an event stream"), written for clarity, not speed. The decoder is checked
against it on hand-picked cases for every rule and on hypothesis-generated streams fed in
arbitrary chunks (inside CRLF pairs, inside UTF-8 sequences, inside the BOM). The last part
replays a recorded stream of every wire API with its framing rewritten (CR or CRLF line ends,
a BOM, comments, ``retry:``/``id:`` fields, ``data:`` without the space) and checks that the
adapter produces the same message.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_notebook.ai._sse import SSEDecoder

# --- the standard, transcribed -----------------------------------------------------------------


def reference_events(body: bytes) -> list[tuple[str, str, str | None, int | None]]:
    text = body.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\r":
            lines.append("".join(current))
            current = []
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
        elif c == "\n":
            lines.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    # whatever follows the last line end is never dispatched (pending data is discarded)
    events = []
    data, event_type, last_id, retry = "", "", None, None
    for line in lines:
        if line == "":
            if data == "":
                event_type = ""
                continue
            if data.endswith("\n"):
                data = data[:-1]
            events.append((event_type or "message", data, last_id, retry))
            data, event_type = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            field, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            field, value = line, ""
        if field == "event":
            event_type = value
        elif field == "data":
            data += value + "\n"
        elif field == "id":
            if "\0" not in value:
                last_id = value
        elif field == "retry" and value and all("0" <= ch <= "9" for ch in value):
            retry = int(value)
    return events


def decode(chunks: list[bytes]) -> list[tuple[str, str, str | None, int | None]]:
    decoder = SSEDecoder()
    out = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.flush()
    return [(e.event, e.data, e.id, e.retry) for e in out]


def decode_data_only(chunks: list[bytes]) -> list[str]:
    decoder = SSEDecoder(data_only=True)
    out = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.flush()


def splits(body: bytes) -> list[list[bytes]]:
    return [[body], [body[i:i + 1] for i in range(len(body))],
            [body[i:i + 2] for i in range(0, len(body), 2)],
            [body[i:i + 3] for i in range(0, len(body), 3)]]


# --- each rule ---------------------------------------------------------------------------------

CASES = {
    "empty data line": (b"data\n\n", [("message", "", None, None)]),
    "empty data: line": (b"data:\n\n", [("message", "", None, None)]),
    "empty lines of data are kept": (b"data:\ndata\ndata: x\ndata:\n\n", [("message", "\n\nx\n", None, None)]),
    "comment lines are ignored": (b": hi\n:\ndata: x\n: between\n\n", [("message", "x", None, None)]),
    "a comment-only block dispatches nothing": (b": keep-alive\n\n", []),
    "CRLF": (b"event: e\r\ndata: a\r\ndata: b\r\n\r\n", [("e", "a\nb", None, None)]),
    "CR": (b"event: e\rdata: a\rdata: b\r\r", [("e", "a\nb", None, None)]),
    "mixed line ends": (b"data: a\r\ndata: b\rdata: c\n\r\n", [("message", "a\nb\nc", None, None)]),
    "a BOM at the start": (b"\xef\xbb\xbfdata: x\n\n", [("message", "x", None, None)]),
    "only one BOM is stripped": (b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n", []),
    "data without the space": (b"data:x\n\n", [("message", "x", None, None)]),
    "only one space is dropped": (b"data:  x\n\n", [("message", " x", None, None)]),
    "a field with no colon": (b"data\nevent\n\n", [("message", "", None, None)]),
    "unknown fields are ignored": (b"foo: bar\nData: no\ndata: x\n\n", [("message", "x", None, None)]),
    "event resets after dispatch": (b"event: a\ndata: 1\n\ndata: 2\n\n",
                                    [("a", "1", None, None), ("message", "2", None, None)]),
    "event resets on an empty dispatch": (b"event: a\n\ndata: 2\n\n", [("message", "2", None, None)]),
    "id persists": (b"id: 7\ndata: 1\n\ndata: 2\n\nid\ndata: 3\n\n",
                    [("message", "1", "7", None), ("message", "2", "7", None), ("message", "3", "", None)]),
    "id with NUL is ignored": (b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n",
                               [("message", "a", "1", None), ("message", "b", "1", None)]),
    "retry with digits": (b"retry: 1500\ndata: a\n\n", [("message", "a", None, 1500)]),
    "retry not all digits is ignored": (b"retry: 15x\ndata: a\n\nretry: \xc2\xb2\ndata: b\n\n",
                                        [("message", "a", None, None), ("message", "b", None, None)]),
    "retry alone dispatches nothing": (b"retry: 10\n\n", []),
    "dispatch on the blank line only": (b"data: a\ndata: b\n", []),
    "a trailing event without its blank line is discarded": (b"data: a\n\ndata: b", [("message", "a", None, None)]),
    "an unterminated last line is discarded": (b"data: a\n\ndata: b\n", [("message", "a", None, None)]),
    "invalid UTF-8 becomes U+FFFD": (b"data: \xff!\n\n", [("message", "\ufffd!", None, None)]),
    "a space-only event name": (b"event:  \ndata: a\n\n", [(" ", "a", None, None)]),
}


@pytest.mark.parametrize("body,expected", CASES.values(), ids=CASES.keys())
def test_rule(body: bytes, expected):
    assert reference_events(body) == expected
    for chunks in splits(body):
        assert decode(chunks) == expected
        assert decode_data_only(chunks) == [data for _, data, _, _ in expected]


def test_cr_and_lf_split_across_chunks_is_one_line_end():
    assert decode([b"data: a\r", b"\n", b"\r", b"\n"]) == [("message", "a", None, None)]
    # a lone CR at a chunk end followed by a data line: two line ends, not one
    assert decode([b"data: a\r", b"\r", b"data: b\r\r"]) == [("message", "a", None, None),
                                                             ("message", "b", None, None)]


def test_bom_split_across_chunks():
    assert decode([b"\xef", b"\xbb", b"\xbfdata: x\n\n"]) == [("message", "x", None, None)]


# --- generated streams -------------------------------------------------------------------------

_VALUE = st.text(alphabet=st.sampled_from("ab :\t\u00e9\u20ac\U0001f600\x00\ufeff0123"), max_size=6)
_LINE = st.one_of(
    st.builds(lambda v: "data: " + v, _VALUE), st.builds(lambda v: "data:" + v, _VALUE),
    st.just("data"), st.just("data:"),
    st.builds(lambda v: "event: " + v, _VALUE), st.builds(lambda v: "id: " + v, _VALUE),
    st.builds(lambda v: "retry: " + v, st.sampled_from(["", "0", "10", "1x", "3000", "\u0663"])),
    st.builds(lambda v: ":" + v, _VALUE), st.builds(lambda v: "x-" + v, _VALUE),
    st.just(""), st.just(""),
)
_END = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw) -> bytes:
    bom = draw(st.booleans())
    lines = draw(st.lists(st.tuples(_LINE, _END), max_size=25))
    text = "".join(line + end for line, end in lines)
    tail = draw(st.sampled_from(["", "data: unterminated", "data: x\n"]))
    return ("\ufeff" if bom else "").encode() + (text + tail).encode("utf-8")


@st.composite
def chunkings(draw, body: bytes) -> list[bytes]:
    cuts = sorted(set(draw(st.lists(st.integers(0, max(len(body), 0)), max_size=30))))
    points = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_generated_streams_decode_as_the_standard_says(data):
    body = data.draw(streams())
    chunks = data.draw(chunkings(body))
    expected = reference_events(body)
    assert decode(chunks) == expected
    assert decode_data_only(chunks) == [d for _, d, _, _ in expected]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=20))
def test_arbitrary_bytes_never_raise_and_match_the_standard(body, cuts):
    points = [0, *sorted(c for c in set(cuts) if c <= len(body)), len(body)]
    chunks = [body[a:b] for a, b in itertools.pairwise(points)]
    assert decode(chunks) == reference_events(body)


# --- every wire API, with its framing rewritten ---------------------------------------------------

def reframe(body: bytes, how: str) -> bytes:
    text = body.decode("utf-8").replace("\r\n", "\n")
    if how == "crlf":
        return text.replace("\n", "\r\n").encode()
    if how == "cr":
        return text.replace("\n", "\r").encode()
    if how == "bom-comments-fields":
        # a BOM, a comment and retry/id/unknown fields before every event, data: without space
        blocks = [b for b in text.split("\n\n")]
        tail = blocks.pop()
        out = [": comment\nretry: 3000\nid: 42\nx-unknown: 1\n" + b.replace("data: ", "data:")
               for b in blocks]
        return ("\ufeff" + "\n\n".join(out) + "\n\n" + tail).encode()
    raise AssertionError(how)


WIRE_FIXTURES = [
    ("anthropic-messages", "sdk_tool_use.sse"), ("anthropic-messages", "pyd_thinking_signature_text.sse"),
    ("google-generative-ai", "pyd_text_function_call_signature.sse"),
    ("openai-responses", "vercel_reasoning_encrypted_step1.sse"),
    ("openai-completions", "sdk_parallel_tool_calls.sse"),
    ("openai-completions", "pyd_openrouter_reasoning_details.sse"),
]


@pytest.mark.parametrize("how", ["crlf", "cr", "bom-comments-fields"])
@pytest.mark.parametrize("api,name", WIRE_FIXTURES, ids=[f"{a}/{n[:-4]}" for a, n in WIRE_FIXTURES])
async def test_every_wire_api_reads_any_legal_framing(api, name, how, monkeypatch):
    from test_recorded_wire import ROOT, _replay

    body = (ROOT / api / name).read_bytes()
    _, original = await _replay(api, body, "random", monkeypatch)
    _, reframed = await _replay(api, reframe(body, how), "bytes", monkeypatch)

    def comparable(message):
        dump = message.model_dump()
        dump.pop("timestamp", None)
        for block in dump["content"]:
            if api == "google-generative-ai":
                block.pop("id", None)  # generated per run
        return dump

    assert original.stop_reason in ("stop", "toolUse")
    assert comparable(reframed) == comparable(original)

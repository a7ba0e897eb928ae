"""Streaming JSON (spec 5.11).

``data/partial_json_golden.json`` holds ``[input, parseStreamingJson(input), repairJson(input),
partial-json parse(input) or {"error": ...}]`` rows produced by running pi-ai 0.85.1's own
``dist/utils/json-parse.js`` with npm ``partial-json`` 0.1.7 under node, on every prefix of
five argument documents (escapes, raw control characters, exponents, nesting, pretty
printing) plus the edge cases of the spec. Non-finite numbers are stored as
``{"__float__": "NaN"}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_notebook.ai._json import (MalformedJSONError, parse_json_with_repair, parse_partial_json,
                                  parse_streaming_json, repair_json)

GOLDEN = Path(__file__).parent / "data" / "partial_json_golden.json"


def _decode(obj):
    if isinstance(obj, dict) and set(obj) == {"__float__"}:
        return float(obj["__float__"])
    return obj


def _comparable(value):
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


ROWS = json.loads(GOLDEN.read_text(encoding="utf-8"), object_hook=_decode)


def test_golden_file_is_substantial():
    assert len(ROWS) > 500


@pytest.mark.parametrize("row", ROWS, ids=lambda r: repr(r[0])[:40])
def test_matches_pi_and_npm_partial_json(row):
    text, expected_stream, expected_repair, expected_partial = row
    # pi passes a top-level non-object through; our contract is "always a dict".
    expected = expected_stream if isinstance(expected_stream, dict) else {}
    assert _comparable(parse_streaming_json(text)) == _comparable(expected)
    assert repair_json(text) == expected_repair
    if "error" in expected_partial:
        with pytest.raises(ValueError):
            parse_partial_json(text)
    else:
        assert _comparable(parse_partial_json(text)) == _comparable(expected_partial["ok"])


@pytest.mark.parametrize("text,expected", [
    ('{"a": "hel', {"a": "hel"}),
    ('[1,2,', {}),  # a list at top level is not tool arguments
    ('{"a": tr', {"a": True}),
    ('{"a":1,"b":', {"a": 1}),
    ('{"a": {"b": [1, {"c": "x', {"a": {"b": [1, {"c": "x"}]}}),
    ('{"a": 123.', {}),
    ('{"x": 1, "a": 123.', {"x": 1}),
    ('{"a": 1e', {"a": 1}),
    ('{"a": -', {}),
    ('{"a": "x\\', {"a": "x"}),
    ('{"a": "x\\u00', {"a": "x"}),
    ('{"a": nu', {"a": None}),
    ("", {}),
    ("   \n", {}),
    (None, {}),
    ("null", {}),
    ("not json at all", {}),
])
def test_spec_examples(text, expected):
    assert parse_streaming_json(text) == expected


def test_partial_list_and_top_level_number():
    assert parse_partial_json("[1,2,") == [1, 2]
    assert parse_partial_json("[1, 2.") == [1]
    with pytest.raises(MalformedJSONError):
        parse_partial_json("123.")


def test_repair_escapes_control_characters_and_lone_backslashes_inside_strings_only():
    assert repair_json('{"p": "C:\\Users\\H"}') == '{"p": "C:\\\\Users\\\\H"}'
    assert repair_json('{"t": "a\tb\nc\x01"}') == '{"t": "a\\tb\\nc\\u0001"}'
    assert repair_json('{\n\t"a": 1}') == '{\n\t"a": 1}'  # whitespace between tokens stays
    assert repair_json('{"ok": "\\n\\"\\u00e9"}') == '{"ok": "\\n\\"\\u00e9"}'
    assert repair_json('{"end": "x\\') == '{"end": "x\\\\'


def test_parse_json_with_repair_repairs_or_raises():
    assert parse_json_with_repair('{"path": "a\\H", "t": "x\ty"}') == {"path": "a\\H", "t": "x\ty"}
    with pytest.raises(ValueError):
        parse_json_with_repair('{"a": 1')
    with pytest.raises(ValueError):
        parse_json_with_repair("{bad}")
    with pytest.raises(ValueError):  # JSON.parse rejects NaN; so do we
        parse_json_with_repair('{"a": NaN}')


def test_anthropic_malformed_sse_arguments_are_repaired_when_complete():
    # item 120: an invalid escape (\H) and a raw tab inside a string
    assert parse_streaming_json('{"path": "C:\\Hello", "x": "a\tb"}') == {"path": "C:\\Hello", "x": "a\tb"}


def test_every_prefix_of_a_document_gives_a_dict_that_grows_to_the_full_value():
    doc = {"path": "nb.py", "code": 'print("hi")\nfor i in range(3):\n\tprint(i)\n', "n": [1, 2.5, None],
           "opts": {"deep": {"er": True}}, "emoji": "\U0001f600 \u00e9"}
    text = json.dumps(doc)
    for k in range(len(text) + 1):
        assert isinstance(parse_streaming_json(text[:k]), dict)
    assert parse_streaming_json(text) == doc


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]",:\\ntrufalse0123456789.-eE \t\x01u"ab')), max_size=40))
def test_never_raises_and_always_returns_a_dict(text):
    assert isinstance(parse_streaming_json(text), dict)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8), max_size=4))
def test_complete_json_round_trips_and_prefixes_never_raise(value):
    text = json.dumps(value)
    assert parse_streaming_json(text) == value
    for k in range(0, len(text), 3):
        assert isinstance(parse_streaming_json(text[:k]), dict)


def test_deep_nesting_does_not_raise():
    assert parse_streaming_json("[" * 5000) == {}
    assert isinstance(parse_streaming_json('{"a": ' * 3000), dict)

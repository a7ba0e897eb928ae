"""Tool-argument validation (spec 5.12, checklist 96-101).

``data/validation_golden.json`` rows are ``[schema, arguments, {"ok": result} | {"error": message}]``
produced by pi-ai 0.85.1's own ``dist/utils/validation.js`` (TypeBox 1.3.7) under node,
for the whole coercion table, the optional-null rules, unions and a set of failures.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
from pydantic import BaseModel, Field

from pi_notebook.ai.types import Tool, ToolCall
from pi_notebook.ai.validation import (ToolArgumentsError, ToolNotFoundError, validate_tool_arguments,
                                       validate_tool_call)

GOLDEN = json.loads((Path(__file__).parent / "data" / "validation_golden.json").read_text(encoding="utf-8"))


def _tool(schema: dict[str, Any], name: str = "t") -> Tool:
    return Tool(name=name, description="", parameters=schema)


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        schema["required"] = required
    return schema


def _call(args: Any, name: str = "t") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=args)


@pytest.mark.parametrize("row", GOLDEN, ids=lambda r: json.dumps(r[1])[:50])
def test_matches_pi(row):
    schema, args, expected = row
    if "ok" in expected:
        assert validate_tool_arguments(_tool(schema), _call(args)) == expected["ok"]
    else:
        with pytest.raises(ToolArgumentsError) as info:
            validate_tool_arguments(_tool(schema), _call(args))
        assert str(info.value) == expected["error"]


# --- the coercion table of 5.12, spelled out (item 97) -------------------------------------

@pytest.mark.parametrize("type_name,given,expected", [
    ("number", "42", 42), ("number", True, 1), ("number", None, 0),
    ("integer", "42", 42),
    ("boolean", "true", True), ("boolean", "false", False), ("boolean", 1, True), ("boolean", 0, False),
    ("string", None, ""), ("string", True, "true"),
    ("null", "", None), ("null", 0, None), ("null", False, None),
    (["number", "string"], "1", "1"),
    (["boolean", "number"], "1", 1),
])
def test_coercion_table_passes(type_name, given, expected):
    out = validate_tool_arguments(_tool(_obj({"v": {"type": type_name}}, ["v"])), _call({"v": given}))
    assert out == {"v": expected}
    assert type(out["v"]) is type(expected)


@pytest.mark.parametrize("type_name,given", [
    ("integer", "42.1"), ("boolean", "1"), ("boolean", "0"), ("null", "null"),
])
def test_coercion_table_failures(type_name, given):
    with pytest.raises(ToolArgumentsError, match=f"v: must be {type_name}"):
        validate_tool_arguments(_tool(_obj({"v": {"type": type_name}}, ["v"])), _call({"v": given}))


def test_works_without_code_generation_and_coerces_string_to_number():  # item 96
    out = validate_tool_call([_tool(_obj({"n": {"type": "number"}}, ["n"]), "calc")], _call({"n": "42"}, "calc"))
    assert out == {"n": 42}


def test_optional_nulls_removed_nested_and_nullable_union_kept():  # item 98
    schema = _obj({
        "a": {"type": "string"},
        "opt": {"type": "number"},
        "inner": _obj({"x": {"type": "integer"}, "y": {"type": "string"}}, ["x"]),
        "nullable": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }, ["a"])
    out = validate_tool_arguments(_tool(schema), _call(
        {"a": "x", "opt": None, "inner": {"x": "3", "y": None}, "nullable": None}))
    assert out == {"a": "x", "inner": {"x": 3}, "nullable": None}


def test_required_null_is_not_removed():
    out = validate_tool_arguments(_tool(_obj({"a": {"type": "string"}}, ["a"])), _call({"a": None}))
    assert out == {"a": ""}  # kept, then coerced like AJV


def test_null_kept_for_optional_ref_to_nullable_schema():  # item 99
    schema = {"type": "object", "properties": {"r": {"$ref": "#/$defs/N"}},
              "$defs": {"N": {"type": ["string", "null"]}}}
    assert validate_tool_arguments(_tool(schema), _call({"r": None})) == {"r": None}


def test_union_arms_keep_matching_values_and_coerce_others():  # item 100
    schema = _obj({"n": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                   "m": {"oneOf": [{"type": "number"}, {"type": "null"}]}})
    assert validate_tool_arguments(_tool(schema), _call({"n": None, "m": 5})) == {"n": None, "m": 5}
    assert validate_tool_arguments(_tool(schema), _call({"n": "42"})) == {"n": 42}


def test_array_or_null_accepts_null():  # item 101
    schema = _obj({"v": {"type": ["array", "null"]}}, ["v"])
    assert validate_tool_arguments(_tool(schema), _call({"v": None})) == {"v": None}


def test_nested_properties_additional_properties_and_items_are_coerced():
    schema = _obj({
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "l": {"type": "array", "items": {"type": "boolean"}},
        "t": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}]},
        "all": {"allOf": [{"type": "number"}, {"minimum": 5}]},
    })
    out = validate_tool_arguments(_tool(schema), _call(
        {"m": {"x": "1"}, "l": ["true", 0], "t": ["1.5", 2], "all": "7"}))
    assert out == {"m": {"x": 1}, "l": [True, False], "t": [1.5, "2"], "all": 7}


def test_error_message_format_paths_and_received_arguments():
    schema = _obj({"deep": _obj({"x": {"type": "number"}, "y": {"type": "string"}}, ["x", "y"]),
                   "n": {"type": "integer"}}, ["deep"])
    args = {"deep": {"x": "nope"}, "n": "1.5"}
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(_tool(schema, "probe"), _call(args, "probe"))
    text = str(info.value)
    assert text.startswith('Validation failed for tool "probe":\n')
    assert "  - deep.y: must have required properties y\n" in text
    assert "  - deep.x: must be number\n" in text
    assert "  - n: must be integer\n" in text
    assert text.endswith("\n\nReceived arguments:\n" + json.dumps(args, indent=2))
    with pytest.raises(ToolArgumentsError, match=r"  - root: must be object"):
        validate_tool_arguments(_tool({"type": "object"}), {"name": "t", "arguments": ["x"]})


def test_missing_required_properties_are_one_error_like_typebox():
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(_tool(_obj({"a": {}, "b": {}}, ["a", "b"])), _call({}))
    assert "  - a: must have required properties a, b\n" in str(info.value)


def test_never_mutates_the_callers_arguments():
    schema = _obj({"n": {"type": "number"}, "o": {"type": "string"}})
    args = {"n": "42", "o": None, "keep": [1, {"z": None}]}
    snapshot = copy.deepcopy(args)
    call = _call(args)
    out = validate_tool_arguments(_tool(schema), call)
    assert out == {"n": 42, "keep": [1, {"z": None}]}
    assert call.arguments == snapshot
    out["keep"][1]["z"] = "changed"
    assert call.arguments == snapshot


def test_tool_not_found_uses_quoted_pi_text():
    with pytest.raises(ToolNotFoundError, match='^Tool "nope" not found$'):
        validate_tool_call([_tool({"type": "object"}, "t")], _call({}, "nope"))


def test_dict_tool_call_and_any_tool_like_object():
    @dataclass
    class Plain:
        name: str
        parameters: dict

    out = validate_tool_call([Plain("p", _obj({"k": {"type": "integer"}}))], {"name": "p", "arguments": {"k": "7"}})
    assert out == {"k": 7}


def test_refs_inside_union_arms_resolve_against_root_defs():
    schema = {"type": "object", "$defs": {"P": _obj({"x": {"type": "integer"}}, ["x"])},
              "properties": {"p": {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]}}}
    assert validate_tool_arguments(_tool(schema), _call({"p": {"x": 1}})) == {"p": {"x": 1}}
    with pytest.raises(ToolArgumentsError, match="p: must match a schema in anyOf"):
        validate_tool_arguments(_tool(schema), _call({"p": {"x": "no"}}))


# --- pydantic-model parameters ----------------------------------------------------------------

class Point(BaseModel):
    x: int
    y: int = 0


class PlotArgs(BaseModel):
    title: str
    points: list[Point]
    scale: Optional[float] = None
    log: bool = False
    bins: int = Field(default=10, ge=1)


@dataclass
class ModelTool:
    name: str
    parameters: dict
    parameters_model: type


def _model_tool() -> ModelTool:
    return ModelTool("plot", PlotArgs.model_json_schema(), PlotArgs)


def test_pydantic_model_parameters_return_a_model_instance_after_coercion():
    out = validate_tool_arguments(_model_tool(), _call(
        {"title": 5, "points": [{"x": "1", "y": 2}], "scale": None, "log": "true"}, "plot"))
    assert isinstance(out, PlotArgs)
    assert out.title == "5" and out.points == [Point(x=1, y=2)] and out.scale is None and out.log is True


def test_pydantic_errors_use_the_pi_message_format():
    args = {"points": [{"x": "a"}], "bins": 0}
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(_model_tool(), _call(args, "plot"))
    text = str(info.value)
    assert text.startswith('Validation failed for tool "plot":\n')
    assert "  - title: must have required properties title\n" in text
    assert "  - points.0.x: " in text
    assert "  - bins: Input should be greater than or equal to 1" in text
    assert text.endswith("Received arguments:\n" + json.dumps(args, indent=2))


def test_agent_tool_with_model_class_parameters():
    from pi_notebook.agent.types import AgentTool

    async def run(*_a):  # pragma: no cover - never executed here
        raise AssertionError

    tool = AgentTool(name="plot", description="d", parameters=PlotArgs, execute=run)
    out = validate_tool_call([tool], _call({"title": "t", "points": []}, "plot"))
    assert isinstance(out, PlotArgs) and out.bins == 10


def test_a_bare_pydantic_class_as_parameters_is_used_as_the_model():
    @dataclass
    class ClassTool:
        name: str
        parameters: type

    out = validate_tool_call([ClassTool("pt", Point)], _call({"x": "3"}, "pt"))
    assert out == Point(x=3, y=0)


def test_first_validation_skips_jsonschemas_slow_optional_import_but_leaves_it_importable():
    """jsonschema eagerly imports rfc3987_syntax (about 1 s of grammar compiling) that we
    never use; the first tool call must not pay for it, and others may still import it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pi_notebook.ai.validation import validate_tool_arguments\n"
        "class T: name='t'; parameters={'type':'object','properties':{'a':{'type':'integer'}}}; "
        "parameters_model=None\n"
        "class C: name='t'; arguments={'a': '42'}\n"
        "assert validate_tool_arguments(T(), C()) == {'a': 42}\n"
        "assert 'rfc3987_syntax' not in sys.modules\n"
        "import importlib.util\n"
        "print(importlib.util.find_spec('rfc3987_syntax') is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr

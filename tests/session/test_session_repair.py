"""A loaded session is a valid transcript with its labels: check turns stay the product's,
every tool call has exactly one result right after its assistant message."""

from __future__ import annotations

from pi_notebook.agent.types import CheckMessage
from pi_notebook.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_notebook.session import load_session, write_session
from pi_notebook.session.repair import NEVER_RAN_TEXT


def _calls(*ids: str, at: int = 2) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text="running"),
                                     *(ToolCall(id=i, name="python", arguments={"code": "1"}) for i in ids)],
                            stop_reason="toolUse", timestamp=at)


def _result(call_id: str, text: str = "ok", at: int = 3) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="python",
                             content=[TextContent(text=text)], timestamp=at)


def _shape(messages: list) -> list[str]:
    out = []
    for m in messages:
        if m.role == "toolResult":
            out.append(f"result {m.tool_call_id}{' error' if m.is_error else ''}")
        elif m.role == "assistant":
            out.append("assistant " + ",".join(b.id for b in m.content if b.type == "toolCall"))
        else:
            out.append(m.role)
    return out


def _assert_valid(messages: list) -> None:
    """Every call answered once, right after its assistant message; no stray result."""
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        assert m.role != "toolResult", f"a result with no call right before it: {m}"
        if m.role == "assistant":
            wanted = [b.id for b in m.content if b.type == "toolCall"]
            got = []
            while i < len(messages) and messages[i].role == "toolResult":
                got.append(messages[i].tool_call_id)
                i += 1
            assert sorted(got) == sorted(wanted)


def test_a_check_turn_loads_back_as_a_check_with_its_label(tmp_path):
    path = tmp_path / "s.jsonl"
    check = CheckMessage(content="Check: no output shows the answer; print it.",
                         shown="No output showed the answer: the agent was asked to print it.")
    write_session(path, [UserMessage(content="hi"), check], model="faux/m")
    loaded = load_session(path)
    assert type(loaded.messages[0]) is UserMessage
    again = loaded.messages[1]
    assert isinstance(again, CheckMessage)
    assert (again.author, again.shown, again.content) == ("pi_notebook check", check.shown, check.content)


def test_a_call_that_waited_when_the_session_ended_gets_a_never_ran_result_before_later_messages(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _calls("a"), UserMessage(content="fix it")], model="x/y")
    loaded = load_session(path)
    assert _shape(loaded.messages) == ["user", "assistant a", "result a error", "user"]
    result = loaded.messages[2]
    assert result.tool_name == "python" and result.content[0].text == NEVER_RAN_TEXT
    assert NEVER_RAN_TEXT.startswith("Not run: the session ended before this tool call ran")
    assert loaded.repair_notice is not None and "\n" not in loaded.repair_notice
    assert "1 tool call (python)" in loaded.repair_notice and "never ran" in loaded.repair_notice
    _assert_valid(loaded.messages)


def test_a_call_at_the_end_of_the_file_and_one_of_two_answered(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _calls("a", "b"), _result("b")], model="x/y")
    loaded = load_session(path)
    assert _shape(loaded.messages) == ["user", "assistant a,b", "result b", "result a error"]
    _assert_valid(loaded.messages)


def test_a_file_cut_mid_line_inside_the_result_still_loads_valid(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _calls("a"), _result("a", "x" * 200)], model="x/y")
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) - 50])  # the result's line torn
    loaded = load_session(path)
    assert len(loaded.warnings) == 1 and "torn last line" in loaded.warnings[0]
    assert _shape(loaded.messages) == ["user", "assistant a", "result a error"]
    _assert_valid(loaded.messages)


def test_a_result_whose_call_is_missing_is_dropped_and_said(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _result("gone"), _calls("a"), _result("a"),
                         _result("a", "second")], model="x/y")
    loaded = load_session(path)
    assert _shape(loaded.messages) == ["user", "assistant a", "result a"]
    assert loaded.messages[2].content[0].text == "ok"
    assert loaded.repair_notice is not None and "2 tool results without a call" in loaded.repair_notice
    _assert_valid(loaded.messages)


def test_a_result_after_a_later_message_moves_back_next_to_its_call(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _calls("a", "b"), _result("a"),
                         UserMessage(content="steer"), _result("b")], model="x/y")
    loaded = load_session(path)
    assert _shape(loaded.messages) == ["user", "assistant a,b", "result a", "result b", "user"]
    assert loaded.repair_notice is not None and "moved back" in loaded.repair_notice
    _assert_valid(loaded.messages)


def test_reused_call_ids_across_turns_match_their_own_turn(tmp_path):
    path = tmp_path / "s.jsonl"
    write_session(path, [UserMessage(content="go"), _calls("call_0"), UserMessage(content="again"),
                         _calls("call_0"), _result("call_0")], model="x/y")
    loaded = load_session(path)
    assert _shape(loaded.messages) == ["user", "assistant call_0", "result call_0 error", "user",
                                       "assistant call_0", "result call_0"]
    _assert_valid(loaded.messages)


def test_a_valid_transcript_loads_unchanged_with_no_notice(tmp_path):
    path = tmp_path / "s.jsonl"
    messages = [UserMessage(content="go"), _calls("a", "b"), _result("b"), _result("a"),
                AssistantMessage(content=[TextContent(text="done")], stop_reason="stop")]
    write_session(path, messages, model="x/y")
    loaded = load_session(path)
    assert loaded.messages == messages and loaded.repair_notice is None


def test_repair_false_gives_the_file_as_it_is(tmp_path):
    path = tmp_path / "s.jsonl"
    messages = [UserMessage(content="go"), _calls("a")]
    write_session(path, messages, model="x/y")
    loaded = load_session(path, repair=False)
    assert loaded.messages == messages and loaded.repair_notice is None


def test_the_notice_stays_one_short_line_whatever_the_calls_are_named(tmp_path):
    path = tmp_path / "s.jsonl"
    calls = AssistantMessage(content=[ToolCall(id=f"c{i}", name=f"tool{i}" + "x" * 500) for i in range(50)],
                             stop_reason="toolUse")
    write_session(path, [UserMessage(content="go"), calls], model="x/y")
    loaded = load_session(path)
    assert len(loaded.messages) == 52
    assert loaded.repair_notice is not None and "\n" not in loaded.repair_notice
    assert "50 tool calls" in loaded.repair_notice and len(loaded.repair_notice) < 300

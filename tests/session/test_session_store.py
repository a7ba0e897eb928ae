"""The JSONL session file: round trip, crash safety, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pi_notebook.ai.types import (
    AssistantMessage, Cost, ImageContent, TextContent, ThinkingContent, ToolCall,
    ToolResultMessage, Usage, UserMessage,
)
from pi_notebook.session import (
    FORMAT_VERSION, SessionFormatError, SessionPathError, SessionWriter, default_session_dir,
    find_session, latest_session, list_sessions, load_session, new_session_path, resolve_inside,
    session_name_for, write_session,
)

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def conversation() -> list:
    return [
        UserMessage(content="plot the data", timestamp=1_700_000_000_000),
        UserMessage(content=[TextContent(text="and this"),
                             ImageContent(data=PNG_1PX, mime_type="image/png")],
                    timestamp=1_700_000_000_001),
        AssistantMessage(
            content=[ThinkingContent(thinking="let me think", thinking_signature="sig-1"),
                     TextContent(text="Running code."),
                     ToolCall(id="call_1", name="python", arguments={"code": "x = 1\nprint(x)"})],
            api="openai-completions", provider="openai", model="gpt-x", response_id="resp_9",
            usage=Usage(input=120, output=30, cache_read=10, cache_write=5, total_tokens=165,
                        cost=Cost(input=0.001, output=0.002, cache_read=0.0001, total=0.0031)),
            stop_reason="toolUse", timestamp=1_700_000_000_002,
        ),
        ToolResultMessage(tool_call_id="call_1", tool_name="python",
                          content=[TextContent(text="1\n"),
                                   ImageContent(data=PNG_1PX, mime_type="image/png")],
                          details={"elapsed": 0.5, "vars": ["x"]}, is_error=False,
                          timestamp=1_700_000_000_003),
        AssistantMessage(content=[TextContent(text="Done \u2714 \U0001F600")], api="faux",
                         provider="faux", model="faux-1", stop_reason="stop",
                         timestamp=1_700_000_000_004),
        AssistantMessage(content=[], api="faux", provider="faux", model="faux-1",
                         stop_reason="aborted", error_message="Request was aborted",
                         timestamp=1_700_000_000_005),
        ToolResultMessage(tool_call_id="call_2", tool_name="python",
                          content=[TextContent(text="lone surrogate \udc80 in output")],
                          is_error=True, timestamp=1_700_000_000_006),
        {"role": "note", "text": "a custom app message", "timestamp": 1_700_000_000_007},
    ]


def test_round_trip_equals_field_by_field(tmp_path):
    path = tmp_path / "s.jsonl"
    original = conversation()
    with SessionWriter(path, model="openai/gpt-x", name="analysis", started_at=123) as writer:
        for message in original:
            writer.append(message)
    loaded = load_session(path, repair=False)
    assert loaded.warnings == []
    assert loaded.header.model == "openai/gpt-x"
    assert loaded.header.name == "analysis"
    assert loaded.header.started_at == 123
    assert loaded.header.version == FORMAT_VERSION
    assert len(loaded.messages) == len(original)
    for before, after in zip(original, loaded.messages, strict=True):
        assert type(after) is type(before)
        assert after == before
        if not isinstance(before, dict):
            assert after.model_dump() == before.model_dump()


def test_file_is_header_then_one_message_per_line_in_pi_json(tmp_path):
    path = tmp_path / "s.jsonl"
    with SessionWriter(path, model="faux/faux-1", name="n", started_at=5) as writer:
        writer.append(conversation()[2])
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"type": "session", "version": 1, "model": "faux/faux-1",
                                    "startedAt": 5, "name": "n"}
    message = json.loads(lines[1])
    assert message["role"] == "assistant" and message["stopReason"] == "toolUse"
    assert message["content"][2] == {"type": "toolCall", "id": "call_1", "name": "python",
                                     "arguments": {"code": "x = 1\nprint(x)"}}
    assert message["usage"]["cacheRead"] == 10


def test_reopening_appends_after_existing_messages(tmp_path):
    path = tmp_path / "s.jsonl"
    first, second = conversation()[:2]
    with SessionWriter(path, model="a/b") as writer:
        writer.append(first)
    with SessionWriter(path, model="ignored/model") as writer:
        assert writer.header.model == "a/b"
        writer.append(second)
    loaded = load_session(path)
    assert loaded.messages == [first, second]
    assert path.read_text().count('"type":"session"') == 1


def test_agent_listener_saves_on_message_end_only(tmp_path):
    class Event:
        def __init__(self, type, message):
            self.type, self.message = type, message

    path = tmp_path / "s.jsonl"
    message = conversation()[0]
    with SessionWriter(path) as writer:
        writer.on_agent_event(Event("message_start", message))
        writer.on_agent_event(Event("message_update", message))
        writer.on_agent_event(Event("message_end", message))
    assert load_session(path).messages == [message]


def test_unsaveable_message_is_a_clear_error_and_the_file_stays_valid(tmp_path):
    path = tmp_path / "s.jsonl"
    with SessionWriter(path) as writer:
        writer.append(conversation()[0])
        with pytest.raises(TypeError, match="cannot save a object"):
            writer.append(object())
    assert len(load_session(path).messages) == 1


_CHILD_TORN = textwrap.dedent("""
    import os, sys, time
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.session import SessionWriter

    writer = SessionWriter(sys.argv[1], model="faux/faux-1")
    for i in range(5):
        writer.append(UserMessage(content=f"message {i} " + "x" * 200, timestamp=i))
    real_write = os.write

    def half_then_hang(fd, data):
        # the 6th message: half of its bytes reach the file, then the process hangs in write
        real_write(fd, bytes(data[: len(data) // 2]))
        print("torn", flush=True)
        time.sleep(60)

    os.write = half_then_hang
    writer.append(UserMessage(content="message 5 " + "x" * 200, timestamp=5))
""")


def _run_child(source: str, path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", source, str(path)], stdout=subprocess.PIPE,
                            text=True)


def test_sigkill_mid_write_keeps_every_earlier_line(tmp_path):
    path = tmp_path / "crash.jsonl"
    child = _run_child(_CHILD_TORN, path)
    try:
        assert child.stdout.readline().strip() == "torn"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert not path.read_bytes().endswith(b"\n")  # the last line really is torn
    loaded = load_session(path)
    assert [m.content for m in loaded.messages] == [f"message {i} " + "x" * 200 for i in range(5)]
    assert len(loaded.warnings) == 1 and "torn last line (line 7" in loaded.warnings[0]
    # a writer reopening the file cuts the torn tail before appending
    with SessionWriter(path) as writer:
        assert writer.warnings and "removed a torn last line" in writer.warnings[0]
        writer.append(UserMessage(content="after restart", timestamp=9))
    reloaded = load_session(path)
    assert reloaded.warnings == []
    assert [m.content for m in reloaded.messages][-2:] == ["message 4 " + "x" * 200, "after restart"]


_CHILD_LOOP = textwrap.dedent("""
    import sys
    from pi_notebook.ai.types import TextContent, ToolResultMessage
    from pi_notebook.session import SessionWriter

    writer = SessionWriter(sys.argv[1], model="faux/faux-1")
    i = 0
    while True:
        writer.append(ToolResultMessage(tool_call_id=f"c{i}", tool_name="python",
                                        content=[TextContent(text=str(i) * 50_000)], timestamp=i))
        print(i, flush=True)
        i += 1
""")


def test_sigkill_during_a_stream_of_appends_loses_at_most_the_message_in_flight(tmp_path):
    path = tmp_path / "loop.jsonl"
    child = _run_child(_CHILD_LOOP, path)
    completed = -1
    try:
        while completed < 20:
            completed = int(child.stdout.readline())
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    loaded = load_session(path, repair=False)
    ids = [m.tool_call_id for m in loaded.messages]
    assert ids == [f"c{i}" for i in range(len(ids))]  # a clean prefix, in order
    assert len(ids) >= completed + 1  # every append that returned is on disk
    assert len(ids) <= completed + 2  # at most the one in flight beyond that
    for m in loaded.messages:
        assert m.content[0].text == m.tool_call_id[1:] * 50_000


def test_newer_format_version_is_rejected_in_one_line(tmp_path):
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({"type": "session", "version": FORMAT_VERSION + 1,
                                "startedAt": 1}) + "\n")
    with pytest.raises(SessionFormatError) as err:
        load_session(path)
    message = str(err.value)
    assert "version 2 is newer" in message and "\n" not in message
    # a writer refuses to append to it and leaves it untouched
    before = path.read_bytes()
    with pytest.raises(SessionFormatError):
        SessionWriter(path)
    assert path.read_bytes() == before


def test_malformed_middle_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    write_session(path, conversation()[:3], model="x/y")
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(2, "{not json\n")
    path.write_text("".join(lines))
    with pytest.raises(SessionFormatError, match=r"line 3 is not valid JSON"):
        load_session(path)


def test_invalid_message_shape_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    write_session(path, [], model="x/y")
    with open(path, "a") as f:
        f.write(json.dumps({"role": "toolResult", "content": []}) + "\n")
    with pytest.raises(SessionFormatError, match=r"line 2 is not a valid toolResult message"):
        load_session(path)


def test_missing_header_is_rejected(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "hi", "timestamp": 1}) + "\n")
    with pytest.raises(SessionFormatError, match="line 1 is not a session header"):
        load_session(path)


def test_resolve_inside_rejects_paths_outside_the_working_directory(tmp_path):
    base = tmp_path / "work"
    base.mkdir()
    (tmp_path / "secret.jsonl").write_text("")
    assert resolve_inside(base, "sub/s.jsonl") == (base / "sub" / "s.jsonl").resolve()
    for bad in ("../secret.jsonl", str(tmp_path / "secret.jsonl"), "/etc/passwd", "a/../../x"):
        with pytest.raises(SessionPathError, match="outside the working directory"):
            resolve_inside(base, bad)
    (base / "link").symlink_to(tmp_path)
    with pytest.raises(SessionPathError):
        resolve_inside(base, "link/secret.jsonl")
    with pytest.raises(SessionPathError):
        find_session("../secret.jsonl", default_session_dir(base), base)


def test_list_find_and_latest_sessions(tmp_path):
    directory = default_session_dir(tmp_path)
    assert directory == tmp_path / ".pi_notebook" / "sessions"
    assert list_sessions(directory) == []
    old = new_session_path(directory, "analysis", started_at=1_000_000)
    new = new_session_path(directory, "analysis", started_at=2_000_000)
    other = new_session_path(directory, "other", started_at=3_000_000)
    write_session(old, conversation()[:2], model="a/m", name="analysis", started_at=1_000_000)
    write_session(new, conversation()[:4], model="b/m", name="analysis", started_at=2_000_000)
    write_session(other, [], model="c/m", name="other", started_at=3_000_000)
    (directory / "junk.jsonl").write_text("not a session\n")
    sessions = list_sessions(directory)
    assert [(s.name, s.message_count, s.model) for s in sessions] == [
        ("other", 0, "c/m"), ("analysis", 4, "b/m"), ("analysis", 2, "a/m")]
    assert latest_session(directory, "analysis").path == new
    assert find_session("analysis", directory, tmp_path) == new
    assert find_session(old.stem, directory, tmp_path) == old
    relative = os.path.relpath(old, tmp_path)
    assert find_session(relative, directory, tmp_path) == old.resolve()
    with pytest.raises(FileNotFoundError):
        find_session("nothing", directory, tmp_path)


def test_new_session_path_never_reuses_a_file(tmp_path):
    first = new_session_path(tmp_path, "n", started_at=0)
    first.write_text("")
    second = new_session_path(tmp_path, "n", started_at=0)
    assert second != first and second.suffix == ".jsonl"


def test_session_name_for_notebook_or_kernel():
    assert session_name_for("work/My Analysis.ipynb") == "My_Analysis"
    assert session_name_for("3f2a9c1e-aaaa-bbbb") == "kernel-3f2a9c1e"
    assert session_name_for(None, kernel_id="abc") == "kernel-abc"
    assert session_name_for(None) == "session"


def test_write_session_does_not_overwrite_unless_asked(tmp_path):
    path = tmp_path / "saved.jsonl"
    write_session(path, conversation()[:1], model="a/b")
    with pytest.raises(FileExistsError):
        write_session(path, conversation()[:3], model="a/b")
    assert len(load_session(path).messages) == 1
    write_session(path, conversation(), model="a/b", overwrite=True)
    assert load_session(path, repair=False).messages == conversation()
    assert [p.name for p in tmp_path.iterdir()] == ["saved.jsonl"]  # no temp files left


# --- strict header ---------------------------------------------------------------------------

def _header_case(tmp_path, name: str, first_line: str, rest: str = "") -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(first_line + "\n" + rest)
    return path


@pytest.mark.parametrize("name, first_line, found", [
    ("missing", json.dumps({"type": "session", "startedAt": 1}), "found none"),
    ("string", json.dumps({"type": "session", "version": "1", "startedAt": 1}), "found '1'"),
    ("boolean", json.dumps({"type": "session", "version": True, "startedAt": 1}), "found True"),
    ("zero", json.dumps({"type": "session", "version": 0, "startedAt": 1}), "version 0"),
    ("negative", json.dumps({"type": "session", "version": -3, "startedAt": 1}), "version -3"),
    ("future", json.dumps({"type": "session", "version": 7, "startedAt": 1}), "version 7 is newer"),
    ("list", json.dumps([{"type": "session", "version": 1}]), "JSON list"),
    ("number", "1", "JSON number"),
    ("string-header", json.dumps("session"), "JSON string"),
    ("message-first", json.dumps({"role": "user", "content": "hi", "timestamp": 1}),
     "the header is missing"),
    ("blank-first", "", "line 1 is empty"),
    ("foreign-jsonl", json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
     "keys: messages"),
    ("pi-coding-agent", json.dumps({"type": "session", "version": 3, "id": "abc",
                                    "timestamp": "2025-01-01T00:00:00Z", "cwd": "/x"}),
     "another program"),
    ("notebook", "{", "line 1 is not JSON"),
])
def test_header_is_checked_strictly_naming_file_found_and_supported(tmp_path, name, first_line,
                                                                      found):
    user = json.dumps({"role": "user", "content": "hi", "timestamp": 1}) + "\n"
    path = _header_case(tmp_path, name, first_line, user)
    with pytest.raises(SessionFormatError) as err:
        load_session(path)
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    assert str(path) in message and found in message
    assert "reads version 1" in message or "supports (version 1)" in message
    assert "\n" not in message
    # the writer refuses to append to it and leaves it as it was
    before = path.read_bytes()
    with pytest.raises(SessionFormatError):
        SessionWriter(path)
    assert path.read_bytes() == before
    # listing leaves it out instead of failing
    assert list_sessions(tmp_path) == []


def test_binary_file_is_a_clear_error(tmp_path):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe garbage\n")
    with pytest.raises(SessionFormatError, match=r"blob\.jsonl: line 1 is not JSON.*version 1"):
        load_session(path)


def test_header_on_a_later_line_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "joined.jsonl"
    write_session(path, conversation()[:2], model="x/y")
    with open(path, "a") as f:
        f.write(json.dumps({"type": "session", "version": 1, "startedAt": 2}) + "\n")
    with pytest.raises(SessionFormatError, match=r"line 4 is a second session header"):
        load_session(path)


def test_a_utf8_bom_before_the_header_is_accepted(tmp_path):
    path = tmp_path / "bom.jsonl"
    write_session(path, conversation()[:1], model="x/y")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_session(path).messages == conversation()[:1]


# --- torn and corrupt lines ------------------------------------------------------------------

def test_truncated_last_line_loads_with_a_notice_at_every_cut(tmp_path):
    path = tmp_path / "t.jsonl"
    write_session(path, conversation()[:5], model="x/y")
    whole = path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    for cut in range(last_start + 1, len(whole) - 1, 7):  # every 7th byte of the last line
        path.write_bytes(whole[:cut])
        loaded = load_session(path)
        assert loaded.messages == conversation()[:4]
        assert len(loaded.warnings) == 1 and "torn last line (line 6" in loaded.warnings[0]


def test_truncated_last_line_cut_inside_a_multibyte_character(tmp_path):
    path = tmp_path / "t.jsonl"
    write_session(path, [UserMessage(content="first", timestamp=1)], model="x/y")
    with open(path, "ab") as f:  # a foreign writer that did not escape non-ASCII
        f.write('{"role":"user","content":"caf\u00e9 \u00e9'.encode()[:-1])
    loaded = load_session(path)
    assert [m.content for m in loaded.messages] == ["first"]
    assert loaded.warnings and "torn last line" in loaded.warnings[0]


def test_corrupt_middle_line_names_its_number_whatever_the_damage(tmp_path):
    for damage in (b"\x00\x00\x00", b'{"role": "user", "content": "cut', b"[1, 2]", b"null"):
        path = tmp_path / "m.jsonl"
        write_session(path, conversation()[:4], model="x/y", overwrite=True)
        lines = path.read_bytes().split(b"\n")
        lines[3] = damage
        path.write_bytes(b"\n".join(lines))
        with pytest.raises(SessionFormatError, match=r"m\.jsonl: line 4 is not"):
            load_session(path)


def test_invalid_utf8_inside_a_message_is_read_with_a_replacement(tmp_path):
    path = tmp_path / "u.jsonl"
    write_session(path, [], model="x/y")
    with open(path, "ab") as f:
        f.write(b'{"role":"user","content":"bad \xff\xfe bytes","timestamp":1}\n')
    loaded = load_session(path)
    assert loaded.messages[0].content == "bad \ufffd\ufffd bytes"
    assert loaded.warnings and "line 2 is not valid UTF-8" in loaded.warnings[0]


# --- writing never fails on the content of a message ----------------------------------------

class _RaisingRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_lone_surrogates_and_odd_details_never_stop_a_write(tmp_path):
    cyclic: dict = {"a": 1}
    cyclic["self"] = cyclic
    odd_details = {
        b"bytes-key": 1, ("tuple", "key"): 2, 3: "int key", None: "none key",
        "nan": float("nan"), "inf": float("-inf"), "bad": _RaisingRepr(), "cycle": cyclic,
        "surrogate": "\ud800 lone", "raw": b"\xff\xfe", "deep": [[[[[[[[[["x"]]]]]]]]]],
    }
    messages = [
        UserMessage(content="surrogates \udc80\ud83d here", timestamp=1),
        ToolResultMessage(tool_call_id="c1", tool_name="python",
                          content=[TextContent(text="output \udcff\udcfe (undecodable bytes)")],
                          details=odd_details, timestamp=2),
        AssistantMessage(content=[TextContent(text="fine \ud800")], api="faux", provider="faux",
                         model="faux-1", timestamp=3),
    ]
    path = tmp_path / "odd.jsonl"
    with SessionWriter(path, model="faux/faux-1") as writer:
        writer.append_many(messages)
    raw = path.read_bytes()
    raw.decode("ascii")  # every line is plain ASCII JSON
    for line in raw.splitlines():
        json.loads(line)  # strict JSON: no NaN/Infinity tokens
        assert b"NaN" not in line and b"Infinity" not in line
    loaded = load_session(path, repair=False)
    assert loaded.warnings == []
    assert loaded.messages[0].content == "surrogates \udc80\ud83d here"
    assert loaded.messages[1].content[0].text == "output \udcff\udcfe (undecodable bytes)"
    details = loaded.messages[1].details
    assert details["nan"] is None and details["inf"] is None
    assert details["bad"] == "<unrepresentable _RaisingRepr>"
    node, hops = details["cycle"], 0
    while isinstance(node, dict) and hops < 5:  # the copy may unroll the cycle once
        node, hops = node["self"], hops + 1
    assert node == "[circular reference]"
    assert details["3"] == "int key" and details["null"] == "none key"
    assert details["b'bytes-key'"] == 1
    # write_session (%agent save) takes the same path
    write_session(tmp_path / "saved.jsonl", messages, model="faux/faux-1")
    assert len(load_session(tmp_path / "saved.jsonl", repair=False).messages) == 3


# --- write errors ------------------------------------------------------------------------------

def test_disk_full_mid_line_leaves_the_file_valid_and_stops_the_writer(tmp_path, monkeypatch):
    import errno

    from pi_notebook.session import store
    from pi_notebook.session.store import SessionWriteError

    path = tmp_path / "full.jsonl"
    writer = SessionWriter(path, model="faux/faux-1")
    writer.append(UserMessage(content="saved", timestamp=1))
    real_write = os.write

    def disk_full(fd, data):
        real_write(fd, bytes(data[: len(data) // 3]))  # part of the line lands, then ENOSPC
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", disk_full)
    with pytest.raises(SessionWriteError, match=r"full\.jsonl: could not save a message "
                                                r"\(No space left on device\)"):
        writer.append(UserMessage(content="lost " + "x" * 300, timestamp=2))
    monkeypatch.setattr(store.os, "write", real_write)
    # the partial line was cut off: the file ends after the last whole message
    loaded = load_session(path)
    assert [m.content for m in loaded.messages] == ["saved"] and loaded.warnings == []
    # later appends are refused clearly instead of writing after a gap
    with pytest.raises(SessionWriteError, match="autosave stopped"):
        writer.append(UserMessage(content="later", timestamp=3))
    assert [m.content for m in load_session(path).messages] == ["saved"]
    writer.close()


def test_fsync_error_is_a_write_error_too(tmp_path, monkeypatch):
    import errno

    from pi_notebook.session import store
    from pi_notebook.session.store import SessionWriteError

    path = tmp_path / "io.jsonl"
    with SessionWriter(path, model="faux/faux-1") as writer:
        monkeypatch.setattr(store.os, "fsync", lambda fd: (_ for _ in ()).throw(
            OSError(errno.EIO, "Input/output error")))
        with pytest.raises(SessionWriteError, match="Input/output error"):
            writer.append(UserMessage(content="x", timestamp=1))
        monkeypatch.undo()
    assert load_session(path).messages == []


async def test_disk_full_during_a_run_stops_autosave_with_one_notice_and_the_run_ends_well(
        tmp_path, monkeypatch):
    """The magics' Autosave on a real Agent: the disk fills after the first messages."""
    import errno

    from pi_notebook.agent import Agent, AgentTool, AgentToolResult
    from pi_notebook.ai.providers.faux import (
        faux_assistant_message, faux_tool_call, register_faux_provider,
    )
    from pi_notebook.ai.stream import stream
    from pi_notebook.magics.autosave import Autosave
    from pi_notebook.session import store

    real_write = os.write
    writes = {"n": 0}

    def filling_disk(fd, data):
        writes["n"] += 1
        if writes["n"] > 3:  # header, the prompt, the first answer; then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(store.os, "write", filling_disk)
    faux = register_faux_provider()
    try:
        faux.set_responses([
            faux_assistant_message([faux_tool_call("python", {"code": "1"}, id="c1")],
                                   stop_reason="toolUse"),
            faux_assistant_message("done"),
        ])

        async def execute(tool_call_id, params, signal, on_update):
            return AgentToolResult(content=[TextContent(text="1")])

        tool = AgentTool(name="python", description="run", execute=execute,
                         parameters={"type": "object", "properties": {"code": {"type": "string"}}})
        agent = Agent(initial_state={"model": faux.get_model(), "tools": [tool]}, stream_fn=stream)
        notices: list[str] = []
        autosave = Autosave(enabled=lambda: True, directory=lambda: tmp_path, name=lambda: "nb",
                            transcript=lambda: list(agent.state.messages),
                            model_spec=lambda: "faux/faux-1", warn=notices.append)
        agent.subscribe(lambda event, *_: autosave.message_ended(event.message)
                        if event.type == "message_end" else None)
        await agent.prompt("go")
    finally:
        faux.unregister()
    assert agent.state.messages[-1].content[0].text == "done"  # the run was not disturbed
    assert len(notices) == 1 and notices[0].startswith("Autosave stopped: ")
    assert "No space left on device" in notices[0] and "keeps every message before it" in notices[0]
    monkeypatch.undo()
    loaded = load_session(autosave.path, repair=False)
    assert loaded.warnings == []
    assert [m.role for m in loaded.messages] == ["user", "assistant"]

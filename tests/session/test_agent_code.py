from __future__ import annotations

from typing import Any

import pytest

from pi_notebook.agent import Agent, AgentTool, AgentToolResult
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.ai.stream import stream_simple
from pi_notebook.ai.types import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
)
from pi_notebook.session.agent_code import latest_run, next_input_payload, python_calls, runnable_code
from pi_notebook.tools.output.updates import ErrorOutput, PythonCallDetails, ResultOutput, StreamOutput

CANARY = "sk-canary-agent-code-57721566"


def assistant(*calls: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=cid, name="python", arguments={"code": code})
                                     for cid, code in calls],
                            api="faux", provider="faux", model="faux-1", usage=Usage(),
                            stop_reason="toolUse", timestamp=now_ms())


def reply(text: str = "done") -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)], api="faux", provider="faux",
                            model="faux-1", usage=Usage(), stop_reason="stop", timestamp=now_ms())


def result(cid: str, details: Any = None, is_error: bool = False, name: str = "python") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, tool_name=name, content=[TextContent(text="...")],
                             details=details, is_error=is_error, timestamp=now_ms())


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=now_ms())


def ok_details(code: str) -> PythonCallDetails:
    return PythonCallDetails(code=code, outputs=[StreamOutput(text="hi\n"),
                                                 ResultOutput(data={"text/plain": "3"})])


def test_failed_attempts_are_left_out_in_execution_order() -> None:
    messages = [
        user("total revenue please"),
        assistant(("c1", "import pandas as pd\nsales = pd.DataFrame({'revenue': [1, 2]})")),
        result("c1", ok_details("import pandas as pd\nsales = pd.DataFrame({'revenue': [1, 2]})")),
        assistant(("c2", "total = sales['revenu'].sum()")),
        result("c2", PythonCallDetails(code="total = sales['revenu'].sum()",
                                       outputs=[ErrorOutput(ename="KeyError", evalue="'revenu'")]), is_error=True),
        assistant(("c3", "while True: pass")),
        result("c3", PythonCallDetails(code="while True: pass", interrupted=True).model_dump()),
        assistant(("c4", "rm_everything()")),
        result("c4", None, is_error=True),  # denied by the approval policy: never ran
        assistant(("c5", "total = sales['revenue'].sum()\ntotal")),
        result("c5", ok_details("total = sales['revenue'].sum()\ntotal").model_dump()),  # stored form
        reply("The total is 3."),
    ]
    code = runnable_code(messages)
    assert code.startswith("# Code the agent ran, in execution order (2 steps). Review before running.\n"
                           "# Left out: 3 failed attempts (2 error, 1 interrupted)")
    assert "['revenu']" not in code
    assert "while True" not in code and "rm_everything" not in code
    assert code.index("sales = pd.DataFrame") < code.index("total = sales['revenue'].sum()")
    namespace: dict[str, Any] = {}
    exec(compile(code, "<agent code>", "exec"), namespace)  # the cell runs top to bottom
    assert namespace["total"] == 3


def test_legacy_details_dict_and_calls_without_result() -> None:
    messages = [
        assistant(("a", "x = 1"), ("b", "y = x + 1"), ("c", "never_finished()")),
        result("b", {"stdout": "", "error": None, "interrupted": False}),  # results in completion order
        result("a", {"stdout": "", "error": {"ename": "ValueError", "evalue": "", "traceback": ""}}),
    ]
    calls = python_calls(messages)
    assert [(c.tool_call_id, c.outcome) for c in calls] == [("b", "ok"), ("a", "error"), ("c", "no result")]
    assert runnable_code(messages).endswith("\n\ny = x + 1\n")


def test_other_tools_and_empty_runs() -> None:
    messages = [AssistantMessage(content=[ToolCall(id="v", name="list_variables", arguments={})],
                                 api="faux", provider="faux", model="faux-1", usage=Usage(),
                                 stop_reason="toolUse", timestamp=now_ms()),
                result("v", {"text": "..."}, name="list_variables")]
    assert runnable_code(messages) == ""
    assert runnable_code([]) == ""


def test_code_that_ran_wins_secrets_redacted_and_cell_magics_inlined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CODE_TEST_API_KEY", CANARY)
    messages = [
        assistant(("a", "argument version"), ("b", f"key = '{CANARY}'"), ("c", "%%time\nz = 1")),
        result("a", PythonCallDetails(code="ran version")),
        result("b", ok_details(f"key = '{CANARY}'")),
        result("c", ok_details("%%time\nz = 1")),
    ]
    code = runnable_code(messages)
    assert "ran version" in code and "argument version" not in code
    assert CANARY not in code and "[redacted]" in code
    assert "get_ipython().run_cell_magic('time', '', 'z = 1\\n')" in code


def test_latest_run_and_payload() -> None:
    first = [user("first"), assistant(("a", "a = 1")), result("a", ok_details("a = 1")), reply()]
    second = [user("second"), assistant(("b", "b = 2")), result("b", ok_details("b = 2")),
              user("steer: use c"), assistant(("c", "c = 3")), result("c", ok_details("c = 3")), reply()]
    run = latest_run(first + second)
    assert run == second
    code = runnable_code(run)
    assert "a = 1" not in code and "b = 2" in code and "c = 3" in code
    assert next_input_payload(code) == {"source": "set_next_input", "text": code, "replace": False}


async def test_from_a_faux_agent_run() -> None:
    """The messages a real Agent run leaves: a python-like tool that fails once, then works."""
    namespace: dict[str, Any] = {}

    async def python(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        code = params["code"]
        try:
            exec(code, namespace)
        except Exception as exc:
            raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc
        return AgentToolResult(content=[TextContent(text="ok")], details=PythonCallDetails(code=code))

    tool = AgentTool(name="python", label="python", description="run code",
                     parameters={"type": "object", "properties": {"code": {"type": "string"}},
                                 "required": ["code"]}, execute=python)
    faux = register_faux_provider()
    try:
        faux.set_responses([
            faux_assistant_message([faux_tool_call("python", {"code": "value = undefined + 1"})], stop_reason="toolUse"),
            faux_assistant_message([faux_tool_call("python", {"code": "value = 41 + 1"})], stop_reason="toolUse"),
            faux_assistant_message("value is 42"),
        ])
        agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "t", "tools": [tool]},
                      stream_fn=stream_simple)
        await agent.prompt("compute value")
    finally:
        faux.unregister()
    code = runnable_code(latest_run(agent.state.messages))
    assert "value = 41 + 1" in code and "undefined" not in code
    assert "Left out: 1 failed attempt (1 error)" in code


@pytest.mark.kernel
def test_set_next_input_payload_in_a_real_kernel() -> None:
    from helpers.kernel import Kernel, faux_setup

    setup = faux_setup(400) + """
faux.set_responses([
    faux_assistant_message([faux_tool_call('python', {'code': "sales = {'revenue': [1, 2]}"})], stop_reason='toolUse'),
    faux_assistant_message([faux_tool_call('python', {'code': "total = sum(sales['revenu'])"})], stop_reason='toolUse'),
    faux_assistant_message([faux_tool_call('python', {'code': "total = sum(sales['revenue'])\\ntotal"})], stop_reason='toolUse'),
    faux_assistant_message('total is 3'),
])
"""
    with Kernel() as kernel:
        kernel.ok(setup + "from pi_notebook.tools.context.history import install_history\n"
                  "_history = install_history(get_ipython())\n")
        kernel.ok("%%agent -m faux/faux-1 --approve auto\nsum the revenue\n", timeout=120)
        assert kernel.ev("total") == 3
        # the blocking %%agent cell is recorded as a prompt, the agent's code not at all
        kinds = kernel.ev("[(r.kind, r.source) for r in _history.records()[1:]]")  # after setup
        assert kinds == [["agent prompt", "%%agent -m faux/faux-1 --approve auto\nsum the revenue\n"]]
        reply = kernel.ok("from pi_notebook import get_agent\n"
                          "from pi_notebook.session.agent_code import latest_run, runnable_code\n"
                          "get_ipython().set_next_input(runnable_code(latest_run(get_agent().state.messages)))")
        payloads = [p for p in reply.get("payload", []) if p.get("source") == "set_next_input"]
        assert len(payloads) == 1 and payloads[0]["replace"] is False
        text = payloads[0]["text"]
        assert "sales = {'revenue': [1, 2]}" in text and "sum(sales['revenu'])" not in text
        assert "Left out: 1 failed attempt (1 error)" in text
        # the new cell reproduces the result in a clean namespace
        kernel.ok("del sales, total")
        kernel.ok(text)
        assert kernel.ev("total") == 3

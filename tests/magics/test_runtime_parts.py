"""The Runtime's three parts (the conversation, the scheduling of runs, the kernel side)
work through their typed seams, without the facade; the facade keeps no state of its own;
no module of the notebook layer grows past what a reader can hold."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from magics_helpers import FakeView, runtime

from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.magics.conversation import Conversation
from pi_notebook.magics.kernel_side import KernelSide
from pi_notebook.magics.lifecycle import Run, RunOptions
from pi_notebook.magics.queue import PromptQueue
from pi_notebook.magics.resolve import ResolvedModel
from pi_notebook.magics.runs import Runs
from pi_notebook.magics.scheduling import RunScheduler

PACKAGE = Path(__file__).resolve().parents[2] / "pi_notebook"


def _parts(shell, conversation=None):
    kernel = KernelSide(shell, runtime().settings, FakeView)
    runs, queue = Runs(), PromptQueue[Run]()
    conversation = conversation or Conversation(kernel, runs, queue, lambda _conversation: [])
    return kernel, runs, conversation, RunScheduler(kernel, conversation, runs, queue)


async def test_the_parts_answer_a_prompt_without_the_runtime(shell, faux):
    faux.set_responses([faux_assistant_message("answered by the parts")])
    _, runs, conversation, scheduler = _parts(shell)
    conversation.resolved = ResolvedModel(faux.get_model(), "explicit")
    conversation.get_agent().state.model = conversation.resolved.model
    try:
        run = scheduler.start_cell("hello", RunOptions(), interactive=False)
        assert runs.newest is run and scheduler.is_running()
        await asyncio.wait_for(asyncio.shield(run.task), 5)
        assert (run.status, run.error) == ("done", None)
        assert runs.newest is None and runs.serving is None
        assert [m.role for m in conversation.agent.state.messages] == ["user", "assistant"]
        assert conversation.latest_prompt is conversation.agent.state.messages[0]
        assert run.view.kinds("finish") == [("finish", "done")]
        assert ("policy", run.policy) in run.view.calls  # readied by the conversation's steps
    finally:
        scheduler.cancel_tasks()
        conversation.close()


class _NeverReady:
    """A conversation that records what the scheduler asks of it (the RunConversation seam)."""

    def __init__(self, settings):
        self.asked: list[str] = []
        self._settings = settings
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def ready_for(self, run):
        self.asked.append(f"ready_for {run.text}")
        self.started.set()
        await self.release.wait()
        return SimpleNamespace(state=SimpleNamespace(messages=[]))  # an Agent with nothing said

    def abort(self):
        self.asked.append("abort")
        self.release.set()

    def run_ended(self):
        self.asked.append("run_ended")

    def current_model(self):
        return None

    def context_window(self):
        return 0

    def settings_now(self):
        return self._settings


async def test_a_queued_cell_aborted_before_its_turn_never_reaches_the_conversation(shell):
    from pi_notebook.magics.settings import run_settings

    fake = _NeverReady(run_settings(runtime().settings))
    _, runs, _, scheduler = _parts(shell, fake)
    try:
        first = scheduler.start_cell("first", RunOptions(), interactive=False)
        await asyncio.wait_for(fake.started.wait(), 5)
        second = scheduler.start_cell("second", RunOptions(), interactive=False)
        assert second.after is first and second.phase == "pending"
        scheduler.abort()
        await asyncio.wait_for(asyncio.shield(second.task), 5)
        assert (first.status, second.status) == ("aborted", "aborted")
        assert fake.asked == ["ready_for first", "abort", "run_ended"]
        assert runs.newest is None
    finally:
        scheduler.cancel_tasks()


def test_the_runtime_keeps_no_state_beside_its_parts(shell):
    assert set(vars(runtime())) == {"kernel", "runs", "queue", "conversation", "scheduler", "on_close"}


def test_no_notebook_layer_module_is_over_600_lines_and_the_runtime_parts_under_400():
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
             for folder in ("magics", "widgets", "tools") for path in (PACKAGE / folder).rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 600} == {}
    parts = ("magics/runtime.py", "magics/conversation.py", "magics/scheduling.py", "magics/kernel_side.py")
    assert {name: sizes.get(name) for name in parts if sizes.get(name, 0) > 400} == {}
    assert all(name in sizes for name in parts)

"""The kernel's single conversation: one Agent, the current run, its views, its queues.

Everything here runs on the kernel's asyncio loop thread. Entry points that a widget
comm handler or another thread may call (abort, remove a queued message) go through
:meth:`Runtime.call_on_loop`, which hops with ``loop.call_soon_threadsafe`` when called
off the loop thread (ipykernel 7.0-7.3 under JupyterLab run comm handlers on a
subshell thread; asyncio objects touched from there never wake the loop).

A *run* is one task on the kernel loop (strong reference kept here) that prompts the
Agent and then keeps continuing while messages are queued, so a ``%steer`` that
arrives just after the loop's last poll is still delivered. The Agent has exactly one
listener, :meth:`Runtime._on_event`, which fans events out to the view of the cell
whose prompt is being answered, autosaves finished messages and updates the context
meter.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from IPython.core.error import UsageError

from .args import AgentArgs
from .config import AgentMagics
from .resolve import ResolvedModel, resolve_model

__all__ = ["Runtime", "Run", "QueuedItem", "IN_AGENT_RUN", "TextView"]

# True inside a run task (and every task it starts, e.g. the python tool's code):
# the wait-for-run input transformer must not make agent code wait for its own run.
IN_AGENT_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("pi_notebook_in_agent_run",
                                                                    default=False)

_tokens = itertools.count(1)


@dataclass
class QueuedItem:
    token: str
    kind: str  # "steer" | "followup"
    text: str
    message: Any  # the UserMessage object handed to the Agent (matched by identity)
    origin_view: Any  # the view showing it as queued
    own_view: Any = None  # the view of a queued %%agent cell, None for %steer/%followup
    run: Any = None  # the Run it was queued into


@dataclass
class Run:
    task: asyncio.Task[Any] | None
    active_view: Any
    views: list[Any] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    aborted: bool = False
    interactive: bool = True
    approve: str | None = None


class TextView:
    """The view without a widget frontend (terminal IPython): plain text on stdout.

    User messages print when the agent emits them (with the kind they were queued as).
    """

    def __init__(self, model_label: str, *_: Any, **__: Any) -> None:
        self.model_label = model_label
        self._render: Any = None
        self._kinds: dict[str, str] = {}
        self._parts: list[str] = []
        print(f"[agent: {model_label}]")

    def _write(self, text: str | None) -> None:
        if text:
            self._parts.append(text)
            print(text, end="", flush=True)

    def handle_event(self, event: Any) -> None:
        if self._render is None:
            try:
                from ..widgets.text import render_event_text
            except ImportError:  # widgets not importable: a minimal renderer
                render_event_text = _minimal_event_text
            self._render = render_event_text
        kind = None
        message = getattr(event, "message", None)
        if getattr(event, "type", "") == "message_start" and getattr(message, "role", "") == "user":
            kind = self._kinds.pop(_user_text(message), None)
        try:
            self._write(self._render(event, user_kind=kind))
        except TypeError:
            self._write(self._render(event))

    def add_user_message(self, text: str, kind: str = "prompt") -> None:
        self._kinds[text] = kind  # printed when the agent emits it

    def show_queued(self, kind: str, text: str, token: object) -> None:
        self._kinds[text] = kind
        self._write(f"\n[queued {kind}] {text}\n")

    def remove_queued(self, token: object) -> None:
        pass

    async def request_approval(self, request: Any) -> str:
        return "skip"  # nobody can click here; the approval hook fails closed before this

    def set_status(self, status: str, detail: str = "") -> None:
        pass

    def show_notice(self, text: str, level: str = "info") -> None:
        self._write(f"\n[{level}] {text}\n")

    def set_context_usage(self, used: int | None, window: int | None = None) -> None:
        pass

    def finish(self, status: str | None = None) -> None:
        self._write(f"\n[{status or 'done'}]\n")

    def to_markdown(self) -> str:
        return "".join(self._parts)


def _minimal_event_text(event: Any, **_: Any) -> str:
    kind = getattr(event, "type", "")
    if kind == "message_update":
        inner = event.assistant_message_event
        if getattr(inner, "type", "") == "text_delta":
            return inner.delta
    if kind == "tool_execution_start":
        return f"\n[tool {event.tool_name}]\n"
    if kind == "message_end" and getattr(event.message, "error_message", None):
        return f"\n[error] {event.message.error_message}\n"
    return ""


def _user_text(message: Any) -> str:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    return "".join(getattr(b, "text", "") for b in content or [] if getattr(b, "type", "") == "text")


class Runtime:
    """One per kernel: created at ``%load_ext``, dropped at ``%unload_ext``."""

    def __init__(self, shell: Any, settings: AgentMagics, *,
                 view_factory: Callable[..., Any] | None = None,
                 tools_factory: Callable[[Any], list[Any]] | None = None) -> None:
        self.shell = shell
        self.settings = settings
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread = threading.get_ident()
        # test seams: views and tools without ipywidgets / the python tool
        self._view_factory = view_factory
        self._tools_factory = tools_factory
        self.agent: Any = None
        self.resolved: ResolvedModel | None = None
        self.run: Run | None = None  # the newest run (what %steer/%followup/abort address)
        self._agent_run: Run | None = None  # the run the agent is working for (events go there)
        self.queued: dict[str, QueuedItem] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._writer: Any = None
        self._writer_failed = False
        self._session_path: Any = None
        self._pending_reset = False
        self._thinking_override: str | None = None  # from --thinking, kept for the conversation
        self._configured_model: str | None = None  # AgentMagics.model when last resolved
        self.on_agent_created: Callable[[], None] | None = None  # installs the tools' capture
        self.capture_installed = False
        # the latest run's task, first view and duration (status, tests, benchmarks)
        self.last_task: asyncio.Task[Any] | None = None
        self.last_view: Any = None
        self.last_run_seconds: float | None = None

    # --- loop hopping ---------------------------------------------------------------------
    def _get_loop(self) -> asyncio.AbstractEventLoop:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            kernel = getattr(self.shell, "kernel", None)
            loop = getattr(getattr(kernel, "io_loop", None), "asyncio_loop", None)
            if loop is None:
                raise
        self.loop = loop
        self.loop_thread = threading.get_ident()
        return loop

    def call_on_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the kernel loop: now if we are on it, else via a thread-safe hop."""
        loop = self.loop
        if loop is None or (threading.get_ident() == self.loop_thread and not loop.is_closed()):
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    # --- the agent ----------------------------------------------------------------------------
    def get_agent(self) -> Any:
        if self.agent is None:
            self.agent = self._make_agent()
            self._unsubscribe = self.agent.subscribe(self._on_event)
            if self.on_agent_created is not None:
                self.on_agent_created()
                self.capture_installed = True
        return self.agent

    def _make_agent(self) -> Any:
        from ..agent import Agent
        from ..ai.stream import stream_simple

        agent = Agent(
            initial_state={"system_prompt": self.settings.system_prompt,
                           "thinking_level": self.settings.thinking,
                           "tools": self._make_tools()},
            stream_fn=stream_simple,
            get_api_key=_env_api_key,
            before_tool_call=self._make_approval_hook(),
        )
        agent.transform_context = self._transform_context
        return agent

    def _make_tools(self) -> list[Any]:
        if self._tools_factory is not None:
            return list(self._tools_factory(self))
        from ..tools import PythonToolSettings, make_notebook_tools

        conf = self.settings

        def tool_settings() -> PythonToolSettings:
            # placeholder until the magics layer builds it (helper `magics`): read per call
            return PythonToolSettings(
                timeout_s=conf.tool_timeout, max_output_chars=conf.max_output_chars,
                max_value_chars=conf.max_value_chars, max_images=conf.max_images,
                image_pixel_budget=conf.max_image_pixels)

        return list(make_notebook_tools(self.shell, tool_settings))

    def _make_approval_hook(self) -> Any:
        try:
            from ..tools.approval import make_approval_hook
        except ImportError:
            return None
        self._approval_hook = make_approval_hook(self.current_policy, ask=self._ask_approval,
                                                 is_interactive=self.is_interactive,
                                                 notify=self._notify)
        return self._approval_hook

    def _notify(self, text: str) -> None:
        run = self._agent_run or self.run
        if run is not None:
            run.active_view.show_notice(text, "warning")

    def current_policy(self) -> str:
        run = self._agent_run or self.run
        if run is not None and run.approve:
            return run.approve
        return self.settings.approval

    def is_interactive(self) -> bool:
        """Can a human click approval buttons for the current run?"""
        run = self._agent_run or self.run
        return bool(run is not None and run.interactive)

    def _ask_approval(self, request: Any) -> Any:
        run = self._agent_run or self.run
        view = run.active_view if run is not None else None
        if view is None:
            async def deny() -> str:
                return "deny"
            return deny()
        return view.request_approval(request)

    async def _transform_context(self, messages: list[Any], signal: Any = None) -> list[Any]:
        """Shrink old history before a request would overflow the model's window."""
        compactor = self._compactor()
        if compactor is None:
            return messages
        result = compactor(messages, signal)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            result = await result
        return result

    def _compactor(self) -> Any:
        model = self.agent.state.model if self.agent is not None else None
        window = getattr(model, "context_window", 0) or 0
        if not window:
            return None
        key = (getattr(model, "provider", ""), getattr(model, "id", ""), window)
        cached = getattr(self, "_compactor_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            from ..session.compaction import make_context_compactor
        except ImportError:
            return None
        compactor = make_context_compactor(window, self._summarize, on_compaction=self._on_compaction)
        self._compactor_cache = (key, compactor)
        return compactor

    async def _summarize(self, messages: list[Any]) -> str:
        """A summary of old turns, written by the conversation's own model. The key is read
        from the environment for this one request and not kept."""
        from ..session.compaction import make_model_summarizer

        model = self.agent.state.model
        options: dict[str, Any] = {"signal": self.agent.signal}
        key = _env_api_key(model.provider)
        if key:
            options["api_key"] = key
        return await make_model_summarizer(model, options=options)(messages)

    def _on_compaction(self, info: Any) -> None:
        describe = getattr(info, "describe", None)
        text = describe() if callable(describe) else str(info)
        run = self._agent_run or self.run
        if run is not None and run.active_view is not None:
            run.active_view.show_notice(f"Context compacted: {text}", "info")

    # --- model ----------------------------------------------------------------------------------
    def ensure_model(self, explicit: str | None = None, base_url: str | None = None) -> ResolvedModel:
        """Resolve the model when asked to, or once for the first run."""
        agent = self.get_agent()
        configured = self.settings.model or None
        if explicit or base_url or self.resolved is None or configured != self._configured_model:
            resolved = resolve_model(explicit, configured, base_url or self.settings.base_url or None)
            self.resolved = resolved
            self._configured_model = configured
            agent.state.model = resolved.model
        return self.resolved

    @property
    def model_label(self) -> str:
        return self.resolved.label if self.resolved is not None else "(no model)"

    # --- views ----------------------------------------------------------------------------------
    def make_view(self) -> Any:
        loop = self.loop
        if self._view_factory is not None:
            return self._view_factory(self.model_label, loop, self.abort_threadsafe,
                                      self.remove_queued_threadsafe)
        if getattr(self.shell, "kernel", None) is None:
            return TextView(self.model_label)
        from ..widgets.view import AgentView

        model = self.agent.state.model if self.agent is not None else None
        return AgentView(self.model_label, loop, self.abort_threadsafe, self.remove_queued_threadsafe,
                         context_window=getattr(model, "context_window", None) or None)

    def show_view(self, view: Any) -> None:
        """Display the view in the current cell under a display id (for the final transcript)."""
        if isinstance(view, TextView):
            return
        from IPython.display import display

        display_id = uuid.uuid4().hex
        view._pi_display_id = display_id
        view._pi_parent = _current_parent(self.shell)
        target = getattr(view, "widget", view)
        display(target, display_id=display_id)

    def freeze_view(self, view: Any, status: str) -> None:
        """End a view: final status, and replace its display by a static Markdown transcript
        (what the saved notebook shows on GitHub/nbviewer and after a restart)."""
        if getattr(view, "_pi_frozen", False):
            return
        view._pi_frozen = True
        try:
            view.finish(status)
        except Exception as exc:  # a broken view must not break the run's end
            _log(self.shell, f"view.finish failed: {exc!r}")
        display_id = getattr(view, "_pi_display_id", None)
        if display_id is None:
            return
        try:
            markdown = view.to_markdown()
        except Exception as exc:
            markdown = f"*(transcript unavailable: {type(exc).__name__})*"
        from IPython.display import update_display

        try:
            with _parent_of(self.shell, getattr(view, "_pi_parent", None)):
                update_display({"text/markdown": markdown, "text/plain": markdown}, raw=True,
                               display_id=display_id)
        except Exception as exc:  # the live view stays; the run still ends cleanly
            _log(self.shell, f"pi_notebook final transcript failed: {exc!r}")

    # --- starting and queueing ------------------------------------------------------------------
    def is_running(self) -> bool:
        return self.run is not None and self.run.task is not None and not self.run.task.done()

    def apply_args(self, args: AgentArgs) -> None:
        if args.model or args.base_url:
            self.ensure_model(args.model, args.base_url)
        if args.thinking:
            self._thinking_override = args.thinking

    def _apply_settings(self) -> None:
        """Settings changed with %config since the last run take effect now."""
        agent = self.get_agent()
        agent.state.thinking_level = self._thinking_override or self.settings.thinking
        agent.state.system_prompt = self.settings.system_prompt

    def start_cell(self, args: AgentArgs, prompt: str, *, interactive: bool) -> Run:
        """``%%agent``: start a run, or queue the prompt into the running one."""
        self._get_loop()
        prompt = prompt.strip()
        if not prompt:
            raise UsageError("%%agent: the cell body is the prompt, and it is empty.")
        if self.is_running() and not args.new:
            if args.model or args.base_url or args.thinking or args.resume:
                raise UsageError("%%agent: a run is active; its prompt can only be queued as a "
                                 "follow-up (no -m/--base-url/--thinking/--resume). Use %agent "
                                 "abort first, or --new to abort and start fresh.")
            run = self.run
            assert run is not None
            own_view = self.make_view()
            self.show_view(own_view)
            own_view.set_status("queued")
            self._queue("followup", prompt, own_view=own_view)
            run.views.append(own_view)
            return run
        previous = self.run.task if self.is_running() else None
        if previous is not None:  # --new while running: abort, then start fresh
            self.abort()
        self.apply_args(args)  # the model is read when a run starts: safe while one ends
        if args.resume and previous is None:
            self.resume_latest()
        self.ensure_model()
        view = self.make_view()
        self.show_view(view)
        return self._start(prompt, "prompt", view, interactive=interactive, approve=args.approve,
                           new=args.new, previous=previous, args=args)

    def submit(self, kind: str, text: str, *, interactive: bool) -> Run | None:
        """``%steer`` / ``%followup``: queue into the run, or start one."""
        self._get_loop()
        text = text.strip()
        if not text:
            raise UsageError(f"%{'steer' if kind == 'steer' else 'followup'} needs a message.")
        if self.is_running():
            self._queue(kind, text)
            return self.run
        self.ensure_model()
        view = self.make_view()
        self.show_view(view)
        return self._start(text, kind, view, interactive=interactive)

    def _queue(self, kind: str, text: str, own_view: Any = None) -> QueuedItem:
        from ..ai.types import TextContent, UserMessage

        run = self.run
        assert run is not None
        agent = self.get_agent()
        message = UserMessage(content=[TextContent(text=text)])
        if kind == "steer":
            agent.steer(message)
        else:
            agent.follow_up(message)
        token = f"q{next(_tokens)}"
        item = QueuedItem(token, kind, text, message, run.active_view, own_view, run)
        self.queued[token] = item
        run.active_view.show_queued(kind, text, token)
        return item

    def _start(self, text: str, kind: str, view: Any, *, interactive: bool,
               approve: str | None = None, new: bool = False,
               previous: asyncio.Task[Any] | None = None, args: AgentArgs | None = None) -> Run:
        loop = self._get_loop()
        self._apply_settings()
        run = Run(task=None, active_view=view, views=[view], interactive=interactive,
                  approve=approve)
        self.run = run
        hook = getattr(self, "_approval_hook", None)
        if hook is not None and hasattr(hook, "reset_run"):
            hook.reset_run()  # "Always for this run" ends with the run
        view.add_user_message(text, kind)
        run.task = loop.create_task(self._run_body(run, text, new, previous, args),
                                    name="pi_notebook-run")
        self.last_task = run.task
        self.last_view = view
        run.task.add_done_callback(self._task_done)
        return run

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # _run_body catches everything; this is a last resort
            _log(self.shell, f"pi_notebook run task failed: {exc!r}")

    async def _run_body(self, run: Run, text: str, new: bool, previous: asyncio.Task[Any] | None,
                        args: AgentArgs | None) -> None:
        IN_AGENT_RUN.set(True)
        status = "done"
        agent = self.get_agent()
        try:
            if previous is not None:
                await asyncio.wait({previous})
            if new:
                self._reset_conversation()
            if run.aborted:
                status = "aborted"
                return
            self._agent_run = run
            run.active_view.set_status("thinking")
            await agent.prompt(text)
            # a %steer/%followup that arrived after the loop's last poll still gets its turn;
            # an abort (also a direct agent.abort()) ends the run instead
            while not run.aborted and agent.has_queued_messages() and not self._ended_aborted():
                await agent.continue_()
            status = self._final_status(run)
        except asyncio.CancelledError:
            status = "aborted"
            agent.abort()
            raise
        except Exception as exc:
            status = "error"
            try:
                run.active_view.show_notice(f"The run failed: {type(exc).__name__}: {exc}", "error")
            except Exception:
                pass
        finally:
            self._end_run(run, status)

    def _ended_aborted(self) -> bool:
        messages = self.agent.state.messages
        return bool(messages) and getattr(messages[-1], "stop_reason", None) == "aborted"

    def _final_status(self, run: Run) -> str:
        if run.aborted:
            return "aborted"
        messages = self.agent.state.messages
        last = messages[-1] if messages else None
        reason = getattr(last, "stop_reason", None)
        if reason == "aborted":
            return "aborted"
        if reason == "error":
            return "error"
        return "done"

    def _end_run(self, run: Run, status: str) -> None:
        # Whatever is still queued (abort, error) is dropped and shown as removed.
        if self.run is run and self.agent is not None and self.agent.signal is None:
            self.agent.clear_all_queues()  # nothing newer waits on them
        for token, item in list(self.queued.items()):
            if item.run is not run:
                continue
            self.queued.pop(token, None)
            try:
                item.origin_view.remove_queued(token)
            except Exception:
                pass
            if item.own_view is not None:
                item.own_view.show_notice("Not sent: the run ended before this prompt was "
                                          "delivered.", "warning")
                self.freeze_view(item.own_view, status)
        for view in run.views:
            if view is run.active_view or not getattr(view, "_pi_frozen", False):
                self.freeze_view(view, status)
        self.last_run_seconds = time.monotonic() - run.started
        if self._agent_run is run:
            self._agent_run = None
        if self.run is run:
            self.run = None
            if self._pending_reset:
                self._pending_reset = False
                try:
                    self._reset_conversation()
                except RuntimeError:  # the agent is still winding down (unload)
                    pass

    # --- events -------------------------------------------------------------------------------
    def _on_event(self, event: Any, signal: Any = None) -> None:
        """The Agent's one listener. It never raises: a display or autosave problem must
        not turn into a failed run."""
        kind = getattr(event, "type", "")
        if kind == "message_end":
            self._autosave(event.message)
        run = self._agent_run
        if run is None:
            return
        message = getattr(event, "message", None)
        role = getattr(message, "role", None) if message is not None else None
        try:
            if role == "user" and kind == "message_start":
                self._deliver_user_message(run, message)
            view = run.active_view
            view.handle_event(event)
            if kind == "message_end" and role == "assistant":
                self._update_status_after(view, message)
        except Exception as exc:
            _log(self.shell, f"pi_notebook view update failed: {exc!r}")

    def _deliver_user_message(self, run: Run, message: Any) -> None:
        item = next((i for i in self.queued.values() if i.message is message), None)
        if item is None:
            return  # the run's own prompt, already shown
        self.queued.pop(item.token, None)
        item.origin_view.remove_queued(item.token)
        if item.own_view is None or item.own_view is run.active_view:
            # Announce it with its kind (steer / follow-up) before the view sees the
            # message_start: the queued row that carried the label is gone by then.
            run.active_view.add_user_message(item.text, item.kind)
        if item.own_view is not None and item.own_view is not run.active_view:
            # A queued %%agent cell: the answer from here on belongs under that cell.
            self.freeze_view(run.active_view, "done")
            run.active_view = item.own_view
            item.own_view.set_status("thinking")
            # announced, so the view labels it and does not show it twice
            item.own_view.add_user_message(item.text, item.kind)

    def _update_status_after(self, view: Any, message: Any) -> None:
        usage = getattr(message, "usage", None)
        model = self.agent.state.model if self.agent is not None else None
        window = getattr(model, "context_window", 0) or 0
        if usage is not None and window:
            used = (usage.input or 0) + (usage.cache_read or 0) + (usage.cache_write or 0) + (usage.output or 0)
            view.set_context_usage(used, window)

    # --- autosave -------------------------------------------------------------------------------
    def _autosave(self, message: Any) -> None:
        if not self.settings.autosave or self._writer_failed:
            return
        try:
            if self._writer is None:
                self._open_writer()
                return  # the new file already holds the transcript up to this message
            self._writer.append(message)
        except Exception as exc:  # autosave must never break a run
            self._writer_failed = True
            run = self._agent_run or self.run
            if run is not None:
                run.active_view.show_notice(f"Autosave stopped: {exc}", "warning")

    def session_dir(self) -> Any:
        from ..session.store import default_session_dir

        if self.settings.session_dir:
            from pathlib import Path

            return Path(self.settings.session_dir)
        return default_session_dir(os.getcwd())

    def session_name(self) -> str:
        from ..session.store import current_notebook_path, session_name_for

        return session_name_for(current_notebook_path(getattr(self.shell, "user_ns", {})),
                                _kernel_id())

    def _open_writer(self) -> None:
        from ..session.store import SessionWriter, new_session_path

        path = new_session_path(self.session_dir(), self.session_name())
        model = self.agent.state.model
        self._writer = SessionWriter(path, model=f"{model.provider}/{model.id}",
                                     name=self.session_name())
        self._session_path = path
        self._writer.append_many(list(self.agent.state.messages))

    def _close_writer(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None
                self._writer_failed = False

    # --- commands ---------------------------------------------------------------------------
    def abort(self) -> None:
        """Abort the active run (on the loop thread)."""
        run = self.run
        if run is None:
            return
        run.aborted = True
        if self.agent is not None:
            self.agent.abort()
            self.agent.clear_all_queues()
        try:
            run.active_view.set_status("aborting")
        except Exception:
            pass

    def abort_threadsafe(self, *_: Any) -> None:
        self.call_on_loop(self.abort)

    def remove_queued(self, token: str) -> bool:
        item = self.queued.pop(token, None)
        if item is None:
            return False
        removed = self.agent.remove_queued(item.message) if self.agent is not None else False
        item.origin_view.remove_queued(token)
        if item.own_view is not None:
            item.own_view.show_notice("Removed from the queue before it was sent.", "info")
            self.freeze_view(item.own_view, "removed")
        return bool(removed)

    def remove_queued_threadsafe(self, token: str) -> None:
        self.call_on_loop(self.remove_queued, token)

    def _reset_conversation(self) -> None:
        agent = self.get_agent()
        agent.reset()
        self._close_writer()
        self._session_path = None

    def reset(self) -> str:
        if self.is_running():
            self.abort()
            self._pending_reset = True
            return "Aborting the run; the conversation is reset when it ends."
        self._reset_conversation()
        return "New conversation."

    def set_model(self, spec: str) -> str:
        resolved = self.ensure_model(spec)
        note = " (takes effect with the next run)" if self.is_running() else ""
        return f"Model: {resolved.label}{note}"

    def restore(self, messages: list[Any], model_spec: str | None) -> None:
        """Put a saved conversation into the agent (``%agent load``, ``--resume``)."""
        if self.is_running():
            raise UsageError("%agent load: a run is active; %agent abort first.")
        agent = self.get_agent()
        agent.reset()
        self._close_writer()
        agent.state.messages = list(messages)
        if model_spec and not self.settings.model and self.resolved is None:
            try:
                self.ensure_model(model_spec)
            except UsageError:
                pass  # keep default resolution when the saved model is unavailable here

    def resume_latest(self) -> str:
        from ..session.store import latest_session, load_session

        info = latest_session(self.session_dir(), self.session_name())
        if info is None:
            raise UsageError(f"%%agent --resume: no saved session named {self.session_name()!r} "
                             f"in {self.session_dir()}.")
        try:
            loaded = load_session(info.path)
        except (ValueError, OSError) as exc:  # SessionFormatError is a ValueError
            raise UsageError(f"%%agent --resume: {exc}") from None
        self.restore(loaded.messages, loaded.header.model)
        return f"Resumed {info.path.name} ({len(loaded.messages)} messages)."

    def status_text(self) -> str:
        agent = self.agent
        lines = [f"model: {self.model_label}"]
        if self.is_running():
            run = self.run
            assert run is not None
            lines.append(f"run: active for {time.monotonic() - run.started:.1f} s")
        else:
            lines.append("run: idle")
        if agent is not None:
            lines.append(f"messages: {len(agent.state.messages)}; queued: "
                         f"{len(agent.steering_queue)} steering, {len(agent.follow_up_queue)} follow-up")
            lines.append(f"thinking: {agent.state.thinking_level}; approval: {self.current_policy()}")
        if self._session_path is not None:
            lines.append(f"session file: {self._session_path}")
        return "\n".join(lines)

    # --- shutdown -------------------------------------------------------------------------------
    def close(self) -> None:
        """``%unload_ext``: abort, cancel our task, unsubscribe, close the session file."""
        self._closed = True
        task = self.run.task if self.run is not None else None
        self.abort()
        if task is not None and not task.done():
            task.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._close_writer()


def _current_parent(shell: Any) -> Any:
    kernel = getattr(shell, "kernel", None)
    try:
        return kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        return None


@contextlib.contextmanager
def _parent_of(shell: Any, parent: Any) -> Iterator[None]:
    """Publish as a reply to the cell that showed the view.

    ipykernel 7 keeps the parent in a context variable, so the run task already has the
    ``%%agent`` cell's parent. ipykernel 6 has one global parent, the *latest* request,
    which would attach the final transcript to whatever cell ran last; there the
    publisher's parent is swapped for the duration of the call (synchronous, on the
    loop thread, so no other output can slip in between).
    """
    publisher = getattr(shell, "display_pub", None)
    major = _ipykernel_major()
    if not parent or major is None or major >= 7 or not hasattr(publisher, "set_parent"):
        yield
        return
    saved = getattr(publisher, "parent_header", None)
    publisher.set_parent(parent)
    try:
        yield
    finally:
        publisher.parent_header = saved


def _ipykernel_major() -> int | None:
    module = sys.modules.get("ipykernel")  # imported already when there is a kernel
    info = getattr(module, "version_info", None)
    try:
        return int(info[0]) if info else None
    except (TypeError, ValueError):
        return None


def _env_api_key(provider: str) -> str | None:
    """Keys come only from the environment, read per request, never stored."""
    try:
        from ..ai.env import get_env_api_key
    except ImportError:
        return None
    return get_env_api_key(provider)


def _kernel_id() -> str | None:
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:
        return None
    stem = name[:-len(".json")] if name.endswith(".json") else name
    # jupyter_server names it kernel-<id>.json; other launchers use any name
    return stem[len("kernel-"):] if stem.startswith("kernel-") else (stem or None)


def _log(shell: Any, text: str) -> None:
    log = getattr(getattr(shell, "kernel", None), "log", None)
    if log is not None:
        log.warning(text)

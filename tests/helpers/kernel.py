"""Drive a real IPython kernel through jupyter_client, like a frontend does.

Shared by the kernel-level tests (marker ``kernel``) and ``bench/notebook_latency.py``.
Works with ipykernel 6.29 and 7.x: the kernel's Python is ``PI_NOTEBOOK_KERNEL_PYTHON``
(default: this interpreter), started as ``python -m ipykernel_launcher -f <conn>``.

Every iopub message is recorded with its receive time by a pump thread, so a test can
look at exactly what a frontend would have seen. A button click is what
@jupyter-widgets/controls sends: a ``comm_msg`` with
``{"method": "custom", "content": {"event": "click"}}`` to the button's comm id.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager, KernelManager
from jupyter_client.kernelspec import KernelSpecManager

KERNEL_PYTHON = os.environ.get("PI_NOTEBOOK_KERNEL_PYTHON", sys.executable)
REPO = Path(__file__).resolve().parents[2]

# What a notebook runs first in the tests: the extension and a faux model in the kernel.
FAUX_SETUP = """\
%load_ext pi_notebook
from pi_notebook.ai.providers.faux import (register_faux_provider, faux_assistant_message,
    faux_text, faux_tool_call)
faux = register_faux_provider(tokens_per_second={tps})
"""


# kernel-side: a scripted model step that keeps what each request sent (after faux_setup);
# answer(message) answers with ``message`` (a faux message, or a text) and records the context
RECORDING_MODEL = r'''
RECEIVED = []

def answer(message):
    def step(context, options, state, model):
        from pi_notebook.ai.providers.faux import serialize_context
        RECEIVED.append(serialize_context(context))
        return faux_assistant_message(message) if isinstance(message, str) else message
    return step
'''

def make_kernelspec(directory: Path, python: str = KERNEL_PYTHON, env: dict[str, str] | None = None,
                    extra_args: list[str] | None = None) -> str:
    """A kernelspec ``pitest`` in ``directory`` (returns its name)."""
    spec_dir = directory / "kernels" / "pitest"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}", *(extra_args or [])],
            "display_name": "pi_notebook test kernel", "language": "python",
            "env": {"PYTHONPATH": str(REPO), **(env or {})}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return "pitest"


class Kernel:
    """One real kernel plus a client; ``shutdown()`` when done."""

    def __init__(self, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
                 extra_args: list[str] | None = None, log_path: Path | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="pi-kernel-")
        root = Path(self._tmp.name)
        self.cwd = Path(cwd) if cwd is not None else root / "work"
        self.cwd.mkdir(parents=True, exist_ok=True)
        name = make_kernelspec(root, env=env, extra_args=extra_args)
        self.km = KernelManager(kernel_name=name,
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(root / "kernels")]))
        started = time.monotonic()
        self._log = open(log_path, "w") if log_path is not None else None  # noqa: SIM115 - kept open for the kernel, closed in shutdown()
        if self._log is not None:
            self.km.start_kernel(cwd=str(self.cwd), stdout=self._log, stderr=self._log)
        else:
            self.km.start_kernel(cwd=str(self.cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.startup_s = time.monotonic() - started
        self.iopub: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._stop = False
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def restart(self) -> None:
        """Restart the kernel with the iopub reader stopped meanwhile: read during the restart,
        a torn frame failed jupyter_client's signature check (ipykernel 6.29), and the reader
        thread died with it."""
        self._stop = True
        self._pump_thread.join(timeout=5)
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=60)
        self._stop = False
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    # --- iopub ------------------------------------------------------------------------------
    def _pump(self) -> None:
        while not self._stop:
            try:
                message = self.kc.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            except Exception:
                if self._stop:
                    return
                raise
            with self._lock:
                self.iopub.append((time.monotonic(), message))

    def messages(self, since: float = 0.0) -> list[dict[str, Any]]:
        with self._lock:
            return [m for t, m in self.iopub if t >= since]

    # --- execution --------------------------------------------------------------------------
    def execute(self, code: str, timeout: float = 60.0, **kw: Any) -> dict[str, Any]:
        """Run a cell; wait for its reply and its idle status. Returns the reply content with
        ``outputs`` (this cell's iopub outputs) and ``msg_id`` added."""
        msg_id = self.kc.execute(code, **kw)
        return self.wait_reply(msg_id, timeout)

    def start(self, code: str, **kw: Any) -> str:
        """Send a cell without waiting (returns its msg_id)."""
        return self.kc.execute(code, **kw)

    def wait_reply(self, msg_id: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        reply = None
        while reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no execute_reply for {msg_id} within {timeout} s")
            try:
                message = self.kc.get_shell_msg(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if message["parent_header"].get("msg_id") == msg_id:
                reply = message
        while not self._idle_seen(msg_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no idle status for {msg_id}")
            time.sleep(0.005)
        content = dict(reply["content"])
        content["msg_id"] = msg_id
        content["outputs"] = self.outputs_of(msg_id)
        return content

    def _idle_seen(self, msg_id: str) -> bool:
        return any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                   and m["parent_header"].get("msg_id") == msg_id for m in self.messages())

    def outputs_of(self, msg_id: str) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] in ("stream", "display_data", "execute_result", "error",
                                      "update_display_data")]

    def text_of(self, msg_id: str) -> str:
        parts = []
        for m in self.outputs_of(msg_id):
            if m["msg_type"] == "stream":
                parts.append(m["content"]["text"])
            elif m["msg_type"] in ("execute_result", "display_data"):
                parts.append(m["content"]["data"].get("text/plain", ""))
            elif m["msg_type"] == "error":
                parts.append(f"{m['content']['ename']}: {m['content']['evalue']}")
        return "".join(parts)

    def ok(self, code: str, timeout: float = 60.0) -> dict[str, Any]:
        """Run a cell that must succeed."""
        reply = self.execute(code, timeout)
        if reply["status"] != "ok":
            raise AssertionError(f"cell failed: {reply.get('ename')}: {reply.get('evalue')}\n"
                                 + "\n".join(reply.get("traceback", []))[-3000:])
        return reply

    def ev(self, expr: str, timeout: float = 30.0) -> Any:
        """Evaluate ``expr`` silently (user_expressions) and return ``json.loads`` of its
        ``text/plain`` repr, which must be a JSON-compatible literal via ``json.dumps``."""
        reply = self.execute("", silent=True, store_history=False,
                             user_expressions={"x": f"__import__('json').dumps({expr})"},
                             timeout=timeout)
        value = reply["user_expressions"]["x"]
        if value["status"] != "ok":
            raise AssertionError(f"{expr!r} failed: {value.get('ename')}: {value.get('evalue')}")
        import ast

        return json.loads(ast.literal_eval(value["data"]["text/plain"]))

    def wait_for(self, expr: str, timeout: float = 10.0, interval: float = 0.02) -> Any:
        """Poll ``expr`` in the kernel until it is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.ev(expr)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expr!r} stayed falsy for {timeout} s (last: {value!r})")
            time.sleep(interval)

    # --- comms --------------------------------------------------------------------------------
    def send_comm_msg(self, comm_id: str, data: dict[str, Any]) -> str:
        message = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(message)
        return message["header"]["msg_id"]

    def click(self, comm_id: str) -> str:
        return self.send_comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}})

    def open_widget_control_comm(self) -> str:
        """What JupyterLab does on connect: open ipywidgets' control comm (the kernel must have
        imported ipywidgets for it to stay open)."""
        import uuid

        comm_id = uuid.uuid4().hex
        message = self.kc.session.msg("comm_open", {"comm_id": comm_id,
                                                    "target_name": "jupyter.widget.control",
                                                    "data": {}},
                                   metadata={"version": "1.0.0"})  # control protocol version
        self.kc.shell_channel.send(message)
        return comm_id

    def connect_frontend(self) -> None:
        """A frontend on the kernel, as a notebook has one: ipywidgets imported, its control
        comm open and taken (so ``%%agent`` runs in the background and panels can be shown)."""
        self.ok("import ipywidgets")
        self.open_widget_control_comm()
        self.wait_for("__import__('ipywidgets').widgets.widget.Widget._control_comm is not None")

    def widget_states(self) -> dict[str, dict[str, Any]]:
        """model id -> latest known state, from comm_open and update comm_msgs on iopub."""
        states: dict[str, dict[str, Any]] = {}
        for m in self.messages():
            if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget":
                states[m["content"]["comm_id"]] = dict(m["content"]["data"].get("state", {}))
            elif m["msg_type"] == "comm_msg":
                data = m["content"].get("data", {})
                if data.get("method") == "update" and m["content"]["comm_id"] in states:
                    states[m["content"]["comm_id"]].update(data.get("state", {}))
        return states

    def buttons(self, description: str) -> list[str]:
        return [cid for cid, s in self.widget_states().items()
                if s.get("_model_name") == "ButtonModel" and s.get("description") == description]

    def comm_updates(self, comm_ids: set[str] | None = None, since: float = 0.0) -> list[tuple[float, dict[str, Any]]]:
        with self._lock:
            return [(t, m) for t, m in self.iopub if t >= since and m["msg_type"] == "comm_msg"
                    and m["content"].get("data", {}).get("method") == "update"
                    and (comm_ids is None or m["content"]["comm_id"] in comm_ids)]

    # --- lifecycle ----------------------------------------------------------------------------
    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def shutdown(self) -> None:
        if self._stop:
            return  # already shut down (a test may end the kernel early to read its log)
        self._stop = True
        # zmq sockets are not thread-safe: let the pump leave its poll before closing them
        self._pump_thread.join(timeout=2)
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=True)
            if self._log is not None:
                self._log.close()
            self._tmp.cleanup()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def faux_setup(tokens_per_second: float | None = None) -> str:
    return FAUX_SETUP.format(tps=repr(tokens_per_second))


def execute_notebook(cells: list[str], env: dict[str, str] | None = None, *,
                     expect: type[BaseException] | None = None, **client_options: Any) -> Any:
    """Run ``cells`` headless through nbclient (as ``jupyter execute`` does) in a fresh kernel;
    errors are kept in the outputs. Returns the executed notebook (also when nbclient raised
    ``expect``, e.g. ``CellTimeoutError``: the notebook as the executor would save it then).
    ``client_options`` go to ``NotebookClient`` (``timeout``, ``interrupt_on_timeout``...)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    options: dict[str, Any] = {"timeout": 60, "allow_errors": True, **client_options}
    with tempfile.TemporaryDirectory() as tmp:
        name = make_kernelspec(Path(tmp), env=env)
        # the async manager, as `jupyter execute` and papermill use: with a blocking client
        # nbclient reads iopub with blocking calls and its cell timeout never fires
        km = AsyncKernelManager(kernel_name=name,
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(tmp) / "kernels")]))
        client = NotebookClient(nb, km=km, resources={"metadata": {"path": tmp}}, **options)
        if expect is None:
            client.execute()
        else:
            try:
                client.execute()
            except expect:
                pass
            else:
                raise AssertionError(f"nbclient did not raise {expect.__name__}")
    return nb


def kernel_with_fd_capture(**kwargs: Any) -> Kernel:
    """A :class:`Kernel` whose ipykernel captures fds 1/2 as in a notebook: ipykernel turns that
    capture off when it sees ``PYTEST_CURRENT_TEST``, so the variable is hidden while it starts."""
    hidden = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        return Kernel(**kwargs)
    finally:
        if hidden is not None:
            os.environ["PYTEST_CURRENT_TEST"] = hidden


# --- the python tool driven inside a kernel (helpers/kernel_driver.py) -------------------------

TESTS = Path(__file__).resolve().parents[1]


def load_driver(kernel: Kernel) -> Kernel:
    """Load helpers/kernel_driver.py into ``kernel``: the python tool run as the agent runs it,
    in a background task of the kernel loop, its results kept under ``RESULTS[key]``."""
    kernel.ok(f"import sys; sys.path.insert(0, {str(TESTS)!r})\nfrom helpers.kernel_driver import *")
    return kernel


def driver_result(kernel: Kernel, key: str, timeout: float = 30.0) -> dict[str, Any]:
    """The driver's result of the call started under ``key``, once it is there (raising if the
    call raised)."""
    kernel.wait_for(f"{key!r} in RESULTS", timeout=timeout)
    data: dict[str, Any] = kernel.ev(f"RESULTS[{key!r}]")
    assert "raised" not in data, data["raised"]
    return data


# --- a run watched from outside -----------------------------------------------------------------

RUNTIME = "__import__('pi_notebook.magics', fromlist=['_']).current_runtime()"


def probe_until_idle(kernel: Kernel, limit_s: float = 150, reply_timeout: float = 60) -> list[float]:
    """Send ``%agent status`` one after the other while a run is active (for ``limit_s`` at
    most): the seconds each probe waited for its reply, the last one's run no longer active."""
    gaps = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        started = time.monotonic()
        probe = kernel.start("%agent status")
        kernel.wait_reply(probe, timeout=reply_timeout)
        gaps.append(time.monotonic() - started)
        if "run: active" not in kernel.text_of(probe):
            break
    return gaps

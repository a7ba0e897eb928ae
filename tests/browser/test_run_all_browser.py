"""Run All in JupyterLab: every cell ends with its execution count, in a fresh kernel each time.

Two notebooks, each restarted and run whole ten times: the packaged quickstart exactly as it
ships, and three cells (``%load_ext``, ``%%agent``, a plain cell that waits for the run). Each
time every code cell must leave ``[*]`` for a number in the page, and the saved file must hold
that number (none ``null``). The cell after an agent cell is the one at risk: JupyterLab reports
a rendered view for each widget the run shows, and those comm messages arrive right as the agent
cell ends (tools/kernel/shell_parent.py says what the kernel did with them).

The model is scripted: the mechanism is the kernel's, not the model's. An IPython startup file
in the kernel makes ``local/<id>`` a faux model that runs the quickstart's sum in the python
tool and answers with the month it printed, so the quickstart's own check cell passes as it
would with the embedded model.

On a failure the message lists what went over the kernel's WebSocket for the stuck cell: each
frame's type and the cell (or comm) whose request it named as its parent.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Notebook, lab_server, launch, write_notebook

import pi_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

EXAMPLES = Path(pi_notebook.__file__).parent / "examples"
RUNS = 10
# how long the kernel may sit idle while a cell still shows [*] before that cell counts as stuck
STUCK_AFTER_S = 4.0
RUN_TIMEOUT_S = 60.0

SCRIPTED_MODEL = '''\
# The run-all browser test's model: every local/<id> is a scripted one that sums the revenue per
# month in the python tool and answers with the month the code printed.
import re

import pi_notebook.magics.resolve  # registers local/<id> first, so the factory below stays
from pi_notebook.ai.models import register_model_factory
from pi_notebook.ai.providers.faux import faux_assistant_message, faux_tool_call, register_faux_provider

_CODE = ("import pandas as pd\\n"
         "totals = pd.read_csv('data/sales.csv').groupby('month')['revenue'].sum()\\n"
         "print(totals.idxmax())")


def _sum(context, options, state, model):
    return faux_assistant_message([faux_tool_call("python", {"code": _CODE})], stop_reason="toolUse")


def _answer(context, options, state, model):
    result = "".join(getattr(block, "text", "") for block in context.messages[-1].content)
    found = re.search(r"\\d{4}-\\d{2}", result)  # the month in the tool's output
    return faux_assistant_message(f"{found.group(0) if found else 'No month'} had the highest total revenue.")


_faux = register_faux_provider(tokens_per_second=200)
_faux.set_responses([_sum, _answer] * 4)
register_model_factory("local", lambda model_id: _faux.get_model())
'''

# what the last code cell prints once the run it waited for has ended
LAST_PRINTS = {"quickstart.ipynb": "as the agent said", "three.ipynb": "after the run: 4 messages"}
THREE_CELLS = [
    "%load_ext pi_notebook",
    "%%agent -m local/qwen2.5-coder-1.5b --approve auto\nWhich month had the highest revenue?",
    "import pi_notebook\nprint('after the run:', len(pi_notebook.get_agent().state.messages), 'messages')",
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("runall")
    shutil.copy(EXAMPLES / "quickstart.ipynb", root / "quickstart.ipynb")
    shutil.copytree(EXAMPLES / "data", root / "data")
    write_notebook(root / "three.ipynb", THREE_CELLS)
    startup = root / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-scripted-model.py").write_text(SCRIPTED_MODEL)
    with lab_server(root, {"IPYTHONDIR": str(root / "ipython")}) as server:
        yield server


# --- the kernel's WebSocket, decoded ------------------------------------------------------------

def _decode(payload: Any) -> dict[str, Any] | None:
    """One frame of Jupyter's kernel WebSocket: JSON text, or the v1 binary framing (a count,
    that many little-endian offsets, then channel, header, parent header, metadata, content)."""
    try:
        if isinstance(payload, str):
            msg = json.loads(payload)
            return {"channel": msg.get("channel", ""), "header": msg.get("header") or {},
                    "parent": msg.get("parent_header") or {}, "content": msg.get("content") or {}}
        data = bytes(payload)
        count = int.from_bytes(data[:8], "little")
        offsets = [int.from_bytes(data[8 + 8 * i:16 + 8 * i], "little") for i in range(count)]
        parts = [data[offsets[i]:offsets[i + 1]] for i in range(min(count - 1, 5))]
        channel, header, parent, _metadata, content = parts
        return {"channel": channel.decode(), "header": json.loads(header), "parent": json.loads(parent),
                "content": json.loads(content)}
    except (ValueError, IndexError, TypeError, UnicodeDecodeError):
        return None


class Frames:
    """Every kernel frame the page sent and received, in order."""

    def __init__(self, page: Any) -> None:
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.last_received = time.monotonic()
        self.kernel_state = ""  # the execution_state of the latest status received
        page.on("websocket", self._attach)

    def _attach(self, ws: Any) -> None:
        if "/api/kernels/" not in ws.url:
            return
        ws.on("framesent", lambda payload: self._add("sent", payload))
        ws.on("framereceived", lambda payload: self._add("received", payload))

    def _add(self, direction: str, payload: Any) -> None:
        msg = _decode(payload)
        if msg is None:
            return
        self.log.append((direction, msg))
        if direction == "received":
            self.last_received = time.monotonic()
            if msg["header"].get("msg_type") == "status":
                self.kernel_state = msg["content"].get("execution_state", "")

    def mark(self) -> int:
        return len(self.log)

    def explain(self, start: int, stuck: list[int]) -> str:
        """The frames since ``start`` that answer the cells' requests, each with the cell its
        parent names: enough to see which message carried which parent."""
        frames = self.log[start:]
        labels: dict[str, str] = {}
        cell = 0
        for direction, msg in frames:
            kind, msg_id = msg["header"].get("msg_type"), msg["header"].get("msg_id", "")
            if direction == "sent" and kind == "execute_request":
                labels[msg_id] = f"cell {cell}"
                cell += 1
            elif direction == "sent":
                labels[msg_id] = kind
        lines = [f"stuck code cells (0-based among code cells): {stuck}"]
        for direction, msg in frames:
            kind = msg["header"].get("msg_type", "?")
            parent = labels.get(msg["parent"].get("msg_id", ""), "")
            # widget traffic and the server's own requests would bury the cells' messages
            if kind.startswith("comm_") or msg["channel"] not in ("shell", "iopub"):
                continue
            if direction == "sent":
                if kind == "execute_request":
                    lines.append(f"  -> execute_request ({labels[msg['header'].get('msg_id', '')]})")
                continue
            if not parent.startswith("cell "):
                continue
            if kind == "status":
                kind = f"status {msg['content'].get('execution_state')}"
            elif kind == "execute_reply":
                kind = f"execute_reply count={msg['content'].get('execution_count')}"
            lines.append(f"  <- {msg['channel']}: {kind}, parent = {parent}")
        if len(lines) > 120:
            lines = [*lines[:20], "  ...", *lines[-100:]]
        return "\n".join(lines)


# --- one Run All in a fresh kernel --------------------------------------------------------------

_PROMPTS = """() => Array.from(window.jupyterapp.shell.currentWidget.content.node
                     .querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')).map(p => p.innerText.trim())"""


def _restart_and_run_all(nb: Notebook) -> None:
    nb.page.evaluate("""async () => {
        const w = window.jupyterapp.shell.currentWidget;
        await w.sessionContext.restartKernel();
    }""")
    nb.wait_kernel_idle()
    nb.page.evaluate("async () => { await window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs'); }")
    # not awaited: the command's promise settles when every cell has ended, never for a stuck one
    nb.page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def _settle(nb: Notebook, frames: Frames) -> list[str]:
    """The code cells' prompts once every one shows a number, or once the kernel said idle and
    then nothing at all for ``STUCK_AFTER_S`` while some still show ``[*]`` (nothing more will
    come for them)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    nb.page.wait_for_timeout(500)  # the first cells go to [*] as Run All queues them
    while True:
        prompts = nb.page.evaluate(_PROMPTS)
        if all("[*]" not in p and any(ch.isdigit() for ch in p) for p in prompts):
            return prompts
        now = time.monotonic()
        silent = frames.kernel_state == "idle" and now - frames.last_received >= STUCK_AFTER_S
        if silent or now > deadline:
            return prompts
        time.sleep(0.2)


def _saved(nb: Notebook, lab: Any, name: str) -> tuple[list[int | None], str]:
    """The saved code cells' execution counts, and the text the last one printed."""
    nb.page.evaluate("async () => { await window.jupyterapp.commands.execute('docmanager:save'); }")
    code = [c for c in json.loads((lab.root / name).read_text())["cells"] if c["cell_type"] == "code"]
    last = "".join("".join(o.get("text", "")) for o in code[-1]["outputs"])
    return [c.get("execution_count") for c in code], last


def _run_all_times(lab: Any, name: str) -> list[str]:
    """Restart and Run All ``name`` ``RUNS`` times; what went wrong, one entry per run (and the
    page's errors)."""
    from playwright.sync_api import sync_playwright

    failures: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        nb = Notebook(browser, lab, name)
        frames = Frames(nb.page)
        for attempt in range(RUNS):
            start = frames.mark()
            _restart_and_run_all(nb)
            started = time.monotonic()
            prompts = _settle(nb, frames)
            seconds = time.monotonic() - started
            counts, printed = _saved(nb, lab, name)
            stuck = [i for i, p in enumerate(prompts) if "[*]" in p or not any(ch.isdigit() for ch in p)]
            unsaved = [i for i, c in enumerate(counts) if not isinstance(c, int)]
            numbers = [c for c in counts if isinstance(c, int)]
            if stuck or unsaved or numbers != sorted(set(numbers)) or LAST_PRINTS[name] not in printed:
                failures.append(f"{name} run {attempt + 1}: prompts {prompts}, saved counts {counts}, "
                                f"the last cell printed {printed!r}\n"
                                + frames.explain(start, stuck or unsaved))
            else:
                print(f"{name} run {attempt + 1}: {prompts} in {seconds:.1f} s")
        errors = nb.errors_but_restart()
        if errors:
            failures.append(f"page errors: {errors}")
        browser.close()
    return failures


@pytest.mark.parametrize("name", ["quickstart.ipynb", "three.ipynb"])
def test_run_all_in_jupyterlab_ends_every_cell(lab, name):
    failures = _run_all_times(lab, name)
    assert not failures, f"{len(failures)} failures in {RUNS} Run Alls:\n\n" + \
        "\n\n".join(failures)

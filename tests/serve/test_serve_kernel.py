"""``%agent serve`` in a real kernel, driven by the SDK's client in other processes.

One kernel for the module (the last test SIGKILLs it); each test sets the approval policy
it needs. The secret canary sits in the kernel's environment from the start.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time

import pytest

from helpers.kernel import Kernel, faux_setup
from helpers.serve import calls, finish, run_client, serve, start_client

pytestmark = pytest.mark.kernel

CANARY = "sk-servecanary-7Qx9Lm2Pz8Kw4Rt6Yv1N"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    serve_dir = tmp_path_factory.mktemp("serve")
    log = tmp_path_factory.mktemp("log") / "kernel.log"
    kernel = Kernel(env={"PI_NOTEBOOK_SERVE_DIR": str(serve_dir), "PI_NOTEBOOK_APPROVAL": "auto",
                         "SERVE_CANARY_TOKEN": CANARY}, log_path=log)
    try:
        kernel.ok("%load_ext pi_notebook")
        url, token, text, cell = serve(kernel)
        yield {"kernel": kernel, "url": url, "token": token, "text": text, "cell": cell, "dir": serve_dir,
               "log": log}
    finally:
        kernel.shutdown()


def _policy(kernel, policy: str) -> None:
    kernel.ok(f"%config AgentMagics.approval = {policy!r}")


def test_token_is_private_and_never_printed(served):
    assert served["token"] and served["token"] not in served["text"]
    folder = served["dir"]
    assert (folder.stat().st_mode & 0o777) == 0o700
    files = sorted(folder.iterdir())
    assert {p.suffix for p in files} == {".token", ".json"}
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in files)
    entry = json.loads(next(p for p in files if p.name.endswith(".mcp.json")).read_text())
    assert entry["mcpServers"]["pi-notebook"]["headers"]["Authorization"] == f"Bearer {served['token']}"


def test_no_token_wrong_token_and_foreign_origin_are_refused(served):
    url, token = served["url"], served["token"]
    port = url.split(":")[2].split("/")[0]
    refused = ({"token": None}, {"token": token[:-2] + "xx"}, {"token": token, "origin": "http://evil.example"})
    lines = run_client({"sessions": [{"url": url, "steps": [["list"]], **plan} for plan in refused]
                        + [{"url": url, "token": token, "origin": f"http://127.0.0.1:{port}", "steps": [["list"]]}]})
    errors = [line for line in lines if "error" in line]
    assert len(errors) == 3 and all(e["status"] in (401, 403, None) for e in errors), lines
    assert sum(1 for line in lines if line.get("connected")) == 1
    # the right token with the server's own loopback origin is let in
    ok = lines[-1]
    assert ok["tools"]["execute"] == {"read_only": False, "destructive": True}
    assert ok["tools"]["list_variables"]["read_only"] is True
    host = "127.0.0.1"
    for headers, status in (({"Host": f"evil.example:{port}"}, 421),
                            ({"Host": f"{host}:{port}", "Origin": "http://evil.example"}, 403),
                            ({"Host": f"{host}:{port}", "Authorization": "Bearer nope"}, 401)):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("POST", "/mcp", body=b"{}", headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        assert response.status == status, (headers, response.status)
        assert b"nope" not in response.read()


def test_non_loopback_bind_is_refused(served):
    kernel = served["kernel"]
    reply = kernel.execute("%agent serve stop --host 0.0.0.0")
    assert reply["status"] == "ok"  # stop ignores the host: it has nothing to bind
    reply = kernel.execute("%agent serve --host 0.0.0.0")
    assert reply["status"] == "error" and "only 127.0.0.1" in reply["evalue"], reply
    # serving again; and %unload_ext stops it with the extension
    url = serve(kernel)[0]
    kernel.ok("%unload_ext pi_notebook")
    _wait_closed(_port_of(url))
    kernel.ok("%load_ext pi_notebook")
    served["url"], served["token"], served["text"], served["cell"] = serve(kernel)  # for the rest


def test_deny_refuses_and_ask_without_a_frontend_refuses(served, tmp_path):
    kernel = served["kernel"]
    switched, go = tmp_path / "deny-done", tmp_path / "ask-set"

    def steps(policy: str) -> list:
        return [["call", "execute", {"code": f"ran_{policy} = True"}], ["call", "list_variables", {}]]

    try:
        _policy(kernel, "deny")
        client = start_client({"url": served["url"], "token": served["token"],
                               "steps": [*steps("deny"), ["touch", str(switched)], ["wait", str(go)], *steps("ask")]})
        deadline = time.monotonic() + 120
        while not switched.exists():
            assert time.monotonic() < deadline and client.alive(), "the client never finished its deny calls"
            time.sleep(0.05)
        _policy(kernel, "ask")
        go.touch()
        lines = finish(client)
    finally:
        _policy(kernel, "auto")
    results = calls(lines)
    for (execute, listed), policy, words in ((results[:2], "deny", "policy is 'deny'"),
                                             (results[2:], "ask", "not interactive")):
        assert execute["is_error"] and words in execute["text"], execute
        assert f"ran_{policy}" not in listed["text"]
        assert not listed["is_error"]  # read-only tools are not gated
    audit = [json.loads(line) for p in (kernel.cwd / ".pi_notebook" / "sessions").glob("*.serve.jsonl")
             for line in p.read_text().splitlines()]
    decisions = [a["approval"]["decision"] for a in audit if a["tool"] == "execute" and a["approval"]]
    assert "deny" in decisions and "headless" in decisions, audit


def test_a_call_during_a_running_cell_waits_its_turn_and_tools_list_answers(served, tmp_path):
    kernel = served["kernel"]
    go = tmp_path / "cell-started"
    client = start_client({"url": served["url"], "token": served["token"], "steps": [
        ["wait", str(go)], ["list"], ["call", "execute", {"code": "turns.append('outside'); turns"}]]})
    assert client.readline().get("connected")
    started = time.monotonic()
    cell = kernel.start(f"import time\nturns = ['cell starts']\nopen({str(go)!r}, 'w').close()\n"
                        "time.sleep(5)\nturns.append('cell ends')")
    lines = finish(client)
    kernel.wait_reply(cell)
    listed = next(line for line in lines if line.get("step") == "list")
    execute = calls(lines)[0]
    list_s = listed["t1"] - listed["t0"]
    print(f"tools/list while a cell sleeps: {list_s * 1000:.0f} ms; execute answered "
          f"{execute['t1'] - started:.1f} s after the cell started")
    assert listed["t1"] < execute["t1"]
    assert list_s < 4.0  # answered while the cell still runs (it sleeps 5 s)
    assert "['cell starts', 'cell ends', 'outside']" in execute["text"], execute
    assert any("a notebook cell is running" in note for note in execute["progress"]), execute


def test_a_call_waits_for_a_cell_that_awaits(served, tmp_path):
    # top-level await frees the kernel loop while the cell still runs: the call must wait anyway
    kernel = served["kernel"]
    go = tmp_path / "cell-awaits"
    client = start_client({"url": served["url"], "token": served["token"], "steps": [
        ["wait", str(go)], ["call", "execute", {"code": "awaited.append('outside'); awaited"}]]})
    assert client.readline().get("connected")
    cell = kernel.start(f"import asyncio\nawaited = []\nopen({str(go)!r}, 'w').close()\n"
                        "await asyncio.sleep(3)\nawaited.append('cell ends')")
    execute = calls(finish(client))[0]
    kernel.wait_reply(cell)
    assert "['cell ends', 'outside']" in execute["text"], execute


def test_a_call_during_an_agent_run_waits_for_the_run(served, tmp_path):
    kernel = served["kernel"]
    go = tmp_path / "run-started"
    kernel.ok(faux_setup(40))
    kernel.ok("agent_turns = []\n"
              "faux.set_responses([faux_assistant_message([faux_tool_call('python', {'code': "
              "'import time; time.sleep(2); agent_turns.append(\"agent\")'})], stop_reason='toolUse'), "
              "faux_assistant_message('done ' * 20)])")
    client = start_client({"url": served["url"], "token": served["token"], "steps": [
        ["wait", str(go)], ["call", "execute", {"code": "agent_turns.append('outside'); agent_turns"}]]})
    assert client.readline().get("connected")
    kernel.ok("%%agent -m faux/faux-1 --no-wait\nwork")
    go.touch()  # the run is active: its cell returned at once
    execute = calls(finish(client))[0]
    assert "['agent', 'outside']" in execute["text"], execute


def test_stop_interrupts_a_call_a_huge_output_is_budgeted_and_a_figure_is_an_image(served, tmp_path):
    kernel = served["kernel"]
    running = tmp_path / "running"
    client = start_client({"url": served["url"], "token": served["token"], "steps": [
        ["call", "execute", {"code": f"open({str(running)!r}, 'w').close()\nwhile True: pass"}],
        ["call", "execute", {"code": "print('x' * 50_000_000)"}],
        ["call", "execute", {"code": "'still serving'"}],
        ["call", "execute", {"code": "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                                     "plt.plot([1, 3, 2]);"}]]})
    deadline = time.monotonic() + 120
    while not running.exists():
        assert time.monotonic() < deadline and client.alive(), "the call never started"
        time.sleep(0.05)
    kernel.interrupt()  # the kernel's Stop button
    stopped, huge, after, figure = calls(finish(client))
    assert stopped["is_error"] and "KeyboardInterrupt" in stopped["text"], stopped
    assert len(huge["text"]) < 100_000 and "xxxx" in huge["text"], len(huge["text"])
    assert "still serving" in after["text"]
    assert "image" in figure["kinds"], figure  # a figure comes back as an image


def test_two_clients_calls_are_serialized_and_none_is_lost(served):
    kernel = served["kernel"]
    kernel.ok("seq = []")
    plans = [{"url": served["url"], "token": served["token"], "name": name,
              "steps": [["call", "execute", {"code": f"seq.append(({name!r}, {i}))"}] for i in range(25)]}
             for name in ("A", "B")]
    processes = [start_client(plan, own_process=True) for plan in plans]
    results = [finish(p) for p in processes]
    assert all(len(calls(lines)) == 25 and not any(c["is_error"] for c in calls(lines)) for lines in results)
    seq = kernel.ev("seq")
    assert len(seq) == 50
    for name in ("A", "B"):
        assert [i for who, i in seq if who == name] == list(range(25))


def test_the_secret_canary_never_leaves(served):
    kernel = served["kernel"]
    kernel.ok("import os\napi_token = os.environ['SERVE_CANARY_TOKEN']")
    lines = run_client({"url": served["url"], "token": served["token"], "steps": [
        ["call", "execute", {"code": "print(os.environ['SERVE_CANARY_TOKEN'])"}],
        ["call", "execute", {"code": "raise ValueError(api_token)"}],
        ["call", "execute", {"code": "api_token[:12], api_token"}],
        ["call", "list_variables", {}],
        ["call", "inspect_variable", {"name": "api_token"}],
        ["call", "execute", {"code": f"'{CANARY[:20]}' + '{CANARY[20:]}'"}],
        ["call", "no_such_tool", {"x": CANARY}]]})
    assert len(calls(lines)) == 7
    everything = json.dumps(lines)
    assert CANARY not in everything and CANARY[8:24] not in everything, everything
    audit = "".join(p.read_text() for p in (kernel.cwd / ".pi_notebook" / "sessions").glob("*.serve.jsonl"))
    assert "api_token" in audit and CANARY not in audit
    assert CANARY not in served["log"].read_text()


def _wait_buttons(kernel, description: str, count: int) -> list[str]:
    deadline = time.monotonic() + 30
    while len(kernel.buttons(description)) < count:
        assert time.monotonic() < deadline, f"no {count} {description!r} buttons"
        time.sleep(0.05)
    return kernel.buttons(description)


def test_ask_shows_the_call_in_the_serve_cell_and_waits_for_run_or_skip(served):
    # (after the headless tests: a frontend, once seen, is the kernel's for good)
    kernel = served["kernel"]
    kernel.ok("import ipywidgets, os")
    kernel.open_widget_control_comm()
    kernel.wait_for("__import__('ipywidgets').widgets.widget.Widget._control_comm is not None")
    _policy(kernel, "ask")
    since = time.monotonic()
    try:
        client = start_client({"url": served["url"], "token": served["token"], "name": "outside-agent", "steps": [
            ["call", "execute", {"code": "asked = 6 * 7\nprint(os.environ['SERVE_CANARY_TOKEN'])\nasked"}],
            ["call", "execute", {"code": "skipped = 1"}],
            ["call", "execute", {"code": "aborted = 1"}],
            ["call", "execute", {"code": "stopped = 1"}]]})
        run = _wait_buttons(kernel, "Run", 1)
        assert kernel.ev("'asked' in dir()") is False  # the outside agent waits for the click
        kernel.click(run[-1])
        _wait_buttons(kernel, "Run", 2)
        kernel.click(_wait_buttons(kernel, "Skip", 2)[-1])
        _wait_buttons(kernel, "Run", 3)
        kernel.click(_wait_buttons(kernel, "Abort", 3)[-1])  # the call's view: Abort while it asks
        _wait_buttons(kernel, "Run", 4)
        kernel.interrupt()  # the kernel's Stop button while the call asks
        lines = finish(client)
    finally:
        _policy(kernel, "auto")
    first, second, third, fourth = calls(lines)
    assert not first["is_error"] and "42" in first["text"] and "[redacted]" in first["text"], first
    assert second["is_error"] and "declined" in second["text"], second
    assert third["is_error"] and "cancelled in the notebook" in third["text"], third
    assert fourth["is_error"] and "cancelled in the notebook" in fourth["text"], fourth
    assert kernel.ev("'skipped' in dir() or 'aborted' in dir() or 'stopped' in dir()") is False
    shown = [m for m in kernel.messages(since) if m["msg_type"] in ("display_data", "update_display_data")]
    assert shown and all(m["parent_header"].get("msg_id") == served["cell"] for m in shown), \
        [m["parent_header"].get("msg_id") for m in shown]
    transcript = json.dumps([m["content"] for m in shown])
    assert "outside-agent" in transcript and "asked = 6 * 7" in transcript
    assert CANARY not in json.dumps([m["content"] for m in kernel.messages(since)])
    audit = "".join(p.read_text() for p in (kernel.cwd / ".pi_notebook" / "sessions").glob("*.serve.jsonl"))
    assert '"decision": "clicked_run"' in audit and '"decision": "skipped"' in audit


def _port_of(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def _wait_closed(port: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
        except OSError:
            return
        assert time.monotonic() < deadline, f"port {port} still accepts connections"
        time.sleep(0.1)


def test_a_restart_and_a_sigkill_of_the_kernel_end_the_server(served):
    kernel = served["kernel"]
    port = _port_of(served["url"])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # serving
    kernel.restart()
    _wait_closed(port)
    kernel.ok("%load_ext pi_notebook")
    url = serve(kernel)[0]  # serving never starts by itself: the restarted kernel is asked again
    port = _port_of(url)
    pid = kernel.ev("__import__('os').getpid()")
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    os.kill(pid, signal.SIGKILL)
    _wait_closed(port)

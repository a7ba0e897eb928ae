"""The shared llama-server under attack and under load, with a fake server (no model needed):
private files and a per-server key, a forged port file not adopted, Abort during a slow start,
a start that fails ending with one clear line, several kernels at once (slots, and a
first-byte timeout that does not count the queue), deterministic decoding by default.

The fake (fake_llama_server.py) is started by the real supervisor exactly as llama-server
would be: PI_NOTEBOOK_LLAMA_SERVER points at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.processes import alive

from pi_notebook.ai import complete
from pi_notebook.ai.abort import AbortController
from pi_notebook.local import server as local_server
from pi_notebook.local.provider import get_local_server, local_model, stop_local_servers
from pi_notebook.local.server import LlamaServer, private_dir, server_key, servers_dir
from pi_notebook.local.setup import LocalSetupError
from pi_notebook.ai.types import Context, UserMessage

FAKE = Path(__file__).with_name("fake_llama_server.py")


class Fake:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cache = tmp / "cache"
        self.binary = tmp / "bin" / "llama-server"
        self.gguf = tmp / "fake-model.gguf"
        self.record = tmp / "requests.jsonl"
        self.argv_file = tmp / "argv.json"
        self.model_id = str(self.gguf)

    @property
    def model(self):
        return local_model(self.model_id)

    def _records(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def requests(self) -> list[dict]:
        return [line for line in self._records() if "path" in line]

    def dropped(self) -> list[int]:
        """For each answer the client stopped reading: how many chunks the server had sent."""
        return [line["dropped_after"] for line in self._records() if "dropped_after" in line]

    def argv(self) -> list[str]:
        return json.loads(self.argv_file.read_text())

    def info(self) -> dict:
        return json.loads((servers_dir() / f"{server_key(self.model_id)}.json").read_text())


@pytest.fixture
def fake(tmp_path, monkeypatch):
    f = Fake(tmp_path)
    f.binary.parent.mkdir()
    f.binary.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    f.binary.chmod(0o755)
    f.gguf.write_bytes(b"GGUF fake")
    for key, value in {"PI_NOTEBOOK_CACHE": str(f.cache), "PI_NOTEBOOK_LLAMA_SERVER": str(f.binary),
                       "PI_NOTEBOOK_LLAMA_THREADS": "1", "FAKE_LLAMA_RECORD": str(f.record),
                       "FAKE_LLAMA_ARGV": str(f.argv_file)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PI_NOTEBOOK_LLAMA_SLOTS", raising=False)
    yield f
    pid = None
    try:
        pid = f.info()["pid"]
    except (OSError, ValueError, KeyError):
        pass
    stop_local_servers()
    if pid is not None:  # the supervisor stops the server ~1 s after the last lease
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):  # it may exit between the check and here
                os.kill(pid, 9)


def _ask(model, **options):
    return complete(model, Context(messages=[UserMessage(content="hi")]), **options)


def _text(message) -> str:
    return "".join(c.text for c in message.content if c.type == "text")


# --- private files, the key, the pid check -------------------------------------------------------

async def test_the_server_files_are_private_and_requests_carry_its_key(fake):
    answer = await _ask(fake.model)
    assert answer.stop_reason == "stop", answer.error_message
    assert _text(answer) == "Hello from the fake server."
    assert stat.S_IMODE(os.stat(servers_dir()).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(fake.cache / "logs").st_mode) == 0o700
    files = [p for p in (*servers_dir().iterdir(), *(fake.cache / "logs").iterdir())]
    assert {p.suffix for p in files} >= {".json", ".key", ".lease", ".start", ".log"}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    key = (servers_dir() / f"{server_key(fake.model_id)}.key").read_text().strip()
    assert len(key) >= 32
    (request,) = [r for r in fake.requests() if r["path"] == "/v1/chat/completions"]
    assert request["auth"] == f"Bearer {key}"
    info = fake.info()
    cmdline = Path(f"/proc/{info['pid']}/cmdline").read_bytes().decode()
    assert key not in cmdline and "--api-key-file" in cmdline  # never on a command line
    assert key not in json.dumps(answer.model_dump())

    # without the key the server refuses
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{info['port']}/v1/chat/completions", data=b"{}", method="POST"), timeout=5)
    assert refused.value.code == 401


def _decoy(tmp_path: Path, program: Path, name: str) -> tuple[subprocess.Popen, int]:
    """Another loopback server answering /health (and any key): where a forged port file points."""
    port = local_server._free_port()
    env = {**os.environ, "FAKE_LLAMA_RECORD": str(tmp_path / f"{name}.jsonl"),
           "FAKE_LLAMA_ARGV": str(tmp_path / f"{name}.argv")}
    proc = subprocess.Popen([sys.executable, str(program), "--port", str(port)], env=env)
    deadline = time.monotonic() + 30
    while not local_server._healthy(port):
        assert time.monotonic() < deadline and proc.poll() is None, "the decoy did not start"
        time.sleep(0.1)
    return proc, port


@pytest.mark.parametrize("forgery", ["pid of another program", "pid of the server on that port, another program",
                                     "pid of our program, serving another port"])
async def test_a_forged_port_file_is_not_adopted(fake, tmp_path, forgery):
    script = tmp_path / "decoy.py"
    script.write_text(FAKE.read_text())
    decoy, decoy_port = _decoy(tmp_path, script, "decoy")
    ours, _ours_port = _decoy(tmp_path, fake.binary, "ours")  # our binary, not started by us
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        pid = {"pid of another program": sleeper.pid,
               "pid of the server on that port, another program": decoy.pid,
               "pid of our program, serving another port": ours.pid}[forgery]
        info = {"port": decoy_port, "pid": pid, "supervisor": pid, "model": fake.model_id,
                "binary": str(script), "log": str(tmp_path / "x.log")}  # the file's claims are not trusted
        private_dir(servers_dir())
        local_server.write_private(servers_dir() / f"{server_key(fake.model_id)}.json", json.dumps(info))
        local_server.write_private(servers_dir() / f"{server_key(fake.model_id)}.key", "guessed\n")
        answer = await _ask(fake.model)
        assert answer.stop_reason == "stop", answer.error_message
        for name in ("decoy", "ours"):
            record = tmp_path / f"{name}.jsonl"
            sent = record.read_text() if record.exists() else ""
            assert "completions" not in sent, f"the prompt went to the {name} decoy"
        assert fake.info()["port"] != decoy_port
        assert [r for r in fake.requests() if r["path"] == "/v1/chat/completions"]
    finally:
        for proc in (decoy, ours, sleeper):
            proc.kill()
            proc.wait()


async def test_a_port_file_others_may_write_or_a_shared_folder_is_refused(fake, tmp_path):
    private_dir(servers_dir())
    port_file = servers_dir() / f"{server_key(fake.model_id)}.json"
    port_file.write_text(json.dumps({"port": 1, "pid": os.getpid()}))
    port_file.chmod(0o666)
    answer = await _ask(fake.model)
    assert answer.stop_reason == "error"
    assert "Refusing" in answer.error_message and str(port_file) in answer.error_message
    port_file.unlink()

    servers_dir().chmod(0o777)
    answer = await _ask(fake.model)
    assert answer.stop_reason == "error"
    assert "other users may write" in answer.error_message and str(servers_dir()) in answer.error_message
    assert not fake.requests(), "a request was sent despite the refusal"


def test_a_folder_of_another_user_is_refused_and_ours_is_tightened(tmp_path):
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o755)
    ours.chmod(0o755)
    private_dir(ours)
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700  # made by an earlier version: tightened
    link = tmp_path / "link"
    link.symlink_to(ours)
    with pytest.raises(LocalSetupError, match="not a folder"):
        private_dir(link)
    if os.getuid() == 0:  # only root can give a folder to someone else
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(LocalSetupError, match="belongs to user id 65534"):
            private_dir(theirs)
        mine = tmp_path / "file"
        mine.write_text("{}")
        mine.chmod(0o600)
        os.chown(mine, 65534, 65534)
        with pytest.raises(LocalSetupError, match="owned by user id 65534"):
            local_server.read_private(mine)


# --- starting: Abort, failures --------------------------------------------------------------

async def test_abort_during_a_slow_start_ends_the_request_within_a_second(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_LLAMA_HEALTH_DELAY", "60")
    monkeypatch.setenv("FAKE_LLAMA_PID", str(tmp_path / "fake.pid"))
    controller = AbortController()
    task = asyncio.ensure_future(_ask(fake.model, signal=controller.signal))
    await asyncio.sleep(1.0)
    assert not task.done()
    aborted_at = time.monotonic()
    controller.abort()
    answer = await asyncio.wait_for(task, 10)
    elapsed = time.monotonic() - aborted_at
    assert answer.stop_reason == "aborted"
    assert elapsed < 1.0, f"the abort took {elapsed:.2f} s"
    # the start went on in the background; letting go of the server (%unload_ext, exit) ends it
    # at once instead of waiting for it, and the server being started goes away
    assert get_local_server(fake.model_id)._lock.locked()
    started = time.monotonic()
    await asyncio.wait_for(asyncio.to_thread(stop_local_servers), 30)
    assert time.monotonic() - started < 3
    pid = int((tmp_path / "fake.pid").read_text())
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not alive(pid), "the server kept starting after the kernel let go of it"


@pytest.mark.parametrize("where", ["cache", "servers"])
async def test_a_cache_path_that_is_not_a_folder_ends_the_request_with_one_clear_line(
        fake, monkeypatch, caplog, where):
    if where == "cache":
        fake.cache.write_text("not a folder")
        target = fake.cache
    else:
        fake.cache.mkdir()
        target = fake.cache / "servers"
        target.write_text("not a folder")
    caplog.set_level(logging.WARNING)
    for _attempt in range(2):  # and the next request (the next cell) ends the same way
        answer = await asyncio.wait_for(_ask(fake.model), 30)
        assert answer.stop_reason == "error"
        first_line = answer.error_message.splitlines()[0]
        assert "embedded model" in first_line and str(target) in first_line, answer.error_message
    assert any(str(target) in r.getMessage() for r in caplog.records), "the kernel log says nothing"


async def test_a_server_that_exits_at_start_ends_with_the_log_tail(fake, monkeypatch):
    fake.binary.write_text(f"#!{sys.executable}\nimport sys\nprint('boom: cannot load the model', flush=True)\n"
                           "sys.exit(3)\n")
    answer = await asyncio.wait_for(_ask(fake.model), 60)
    assert answer.stop_reason == "error"
    assert "exited with code 3" in answer.error_message
    assert "boom: cannot load the model" in answer.error_message
    assert str(fake.cache / "logs") in answer.error_message


# --- several kernels at once ----------------------------------------------------------------

async def test_the_server_gets_a_slot_per_kernel_and_a_window_per_slot(fake, monkeypatch):
    assert (await _ask(fake.model)).stop_reason == "stop"
    argv = fake.argv()
    slots = int(argv[argv.index("-np") + 1])
    assert slots == local_server.DEFAULT_SLOTS >= 4
    assert int(argv[argv.index("-c") + 1]) == slots * local_server.CONTEXT_WINDOW
    assert "--no-kv-unified" in argv  # a shared pool overflowing fails every slot's request
    # the prompt is read (and its progress reported) 512 tokens at a time
    assert int(argv[argv.index("-b") + 1]) == local_server.PROMPT_BATCH_TOKENS == 512
    assert fake.info()["slots"] == slots


async def test_two_kernels_at_once_both_get_answers_without_waiting_for_each_other(fake, tmp_path, monkeypatch):
    """Two processes (two kernels) hold leases; their requests overlap and both answer in
    about the time of one (each has a slot)."""
    monkeypatch.setenv("FAKE_LLAMA_FIRST_BYTE", "2.0")
    script = (
        "import asyncio, sys, time\n"
        "from pi_notebook.ai import complete\n"
        "from pi_notebook.local.provider import local_model, get_local_server\n"
        "from pi_notebook.ai.types import Context, UserMessage\n"
        "get_local_server(sys.argv[1]).start_blocking()\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "t = time.monotonic()\n"
        "m = asyncio.run(complete(local_model(sys.argv[1]), Context(messages=[UserMessage(content='hi')]),"
        " first_byte_timeout_ms=3000))\n"
        "print(m.stop_reason, round(time.monotonic() - t, 2), flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    kernels = [subprocess.Popen([sys.executable, "-c", script, fake.model_id], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
    try:
        for k in kernels:
            assert k.stdout.readline().strip() == "ready"
        for k in kernels:
            k.stdin.write("go\n")
            k.stdin.flush()
        results = [k.stdout.readline().split() for k in kernels]
        assert [r[0] for r in results] == ["stop", "stop"], results
        assert len({r["port"] for r in fake.requests()}) == 1  # one shared server
    finally:
        for k in kernels:
            k.kill()
            k.wait()


async def test_the_first_byte_timeout_does_not_count_the_wait_for_a_slot(fake, monkeypatch):
    """One slot, a long answer in it; a second request queued behind it for longer than its
    first-byte timeout still gets its answer, because the wait was in the server's queue."""
    monkeypatch.setenv("PI_NOTEBOOK_LLAMA_SLOTS", "1")
    monkeypatch.setenv("FAKE_LLAMA_FIRST_BYTE", "0.3")
    monkeypatch.setenv("FAKE_LLAMA_STREAM_S", "5")
    await asyncio.to_thread(get_local_server(fake.model_id).start_blocking)
    first = asyncio.ensure_future(_ask(fake.model, first_byte_timeout_ms=2000))
    await asyncio.sleep(0.5)
    second = await _ask(fake.model, first_byte_timeout_ms=2000)
    assert second.stop_reason == "stop", second.error_message
    assert (await first).stop_reason == "stop"


async def test_a_server_slow_on_its_own_request_times_out_naming_the_real_setting(fake, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_FIRST_BYTE", "20")
    started = time.monotonic()
    answer = await asyncio.wait_for(_ask(fake.model, first_byte_timeout_ms=1500), 30)
    assert answer.stop_reason == "error"
    assert "first-byte timeout" in answer.error_message
    assert "AgentMagics.first_byte_timeout" in answer.error_message
    assert "first_byte_timeout_ms if" not in answer.error_message
    assert time.monotonic() - started < 15


# --- deterministic by default ---------------------------------------------------------------

async def test_decoding_is_deterministic_unless_the_caller_asks_otherwise(fake):
    await _ask(fake.model)
    await _ask(fake.model, temperature=0.8)
    await _ask(fake.model, sampling_params={"seed": 7})
    bodies = [r["body"] for r in fake.requests() if r["path"] == "/v1/chat/completions"]
    assert [(b.get("temperature"), b.get("seed")) for b in bodies] == [(0, 42), (0.8, 42), (0, 7)]


def test_requests_waiting_reads_the_servers_queue(fake):
    server = LlamaServer(fake.model_id)
    try:
        server.start_blocking()
        assert server.requests_waiting() == 0
        assert local_server.requests_waiting(server.port, "wrong key") is None  # refused: unknown
    finally:
        server.stop()


async def test_a_key_others_may_read_is_refused_and_an_old_port_file_is_replaced(fake):
    private_dir(servers_dir())
    port_file = servers_dir() / f"{server_key(fake.model_id)}.json"
    port_file.write_text(json.dumps({"port": 1, "pid": os.getpid()}))  # an earlier version's file
    port_file.chmod(0o644)
    answer = await _ask(fake.model)
    assert answer.stop_reason == "stop", answer.error_message  # not adopted: a server of ours replaced it
    assert stat.S_IMODE(port_file.stat().st_mode) == 0o600 and fake.info()["port"] != 1

    key_file = servers_dir() / f"{server_key(fake.model_id)}.key"
    key_file.chmod(0o644)
    other_kernel = LlamaServer(fake.model_id)  # joins the running server: reads the files
    with pytest.raises(LocalSetupError, match="Refusing") as refused:
        other_kernel.start_blocking()
    assert str(key_file) in str(refused.value)
    assert other_kernel._lease_fd is None  # no lease left behind


# --- a reply caught in a loop ----------------------------------------------------------------------

async def test_a_reply_caught_in_a_loop_is_cut_early_and_says_why(fake, monkeypatch):
    # the 0.5B's real loop on the held-out pivot request, 500 copies over 20 s
    row = "| Stool| Stool| 93.0 |\n"
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS", json.dumps(["The pivot table is:\n\n", *[row] * 500]))
    monkeypatch.setenv("FAKE_LLAMA_STREAM_S", "20")
    monkeypatch.setenv("FAKE_LLAMA_PROMPT", "[792, 500]")
    answer = await _ask(fake.model)
    assert answer.stop_reason == "length"
    assert _text(answer) == "The pivot table is:\n\n| Stool| Stool| 93.0 |"  # one copy kept
    assert "repeating the same text" in answer.error_message
    # the server's usage comes in its last chunk, never sent: the counts are the stream's own,
    # the prompt from its progress and one token per chunk streamed up to the cut
    copies = int(answer.error_message.split("(")[1].split(" copies")[0])
    assert copies == 6  # a 23-character row: MIN_SPAN // 23 + 1 copies
    assert (answer.usage.input, answer.usage.cache_read) == (292, 500)
    assert answer.usage.output == 1 + copies
    assert answer.usage.total_tokens == 792 + 1 + copies
    deadline = time.monotonic() + 20  # the server notices the dropped connection at its next write
    while not fake.dropped() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert fake.dropped() and fake.dropped()[0] < 500  # the request was stopped, not read to its end


async def test_a_tool_call_whose_code_loops_is_cut_early_and_not_returned(fake, monkeypatch):
    # the embedded model's JSON call (the grammar mode of a packaged model), its code one line
    # written 500 times: the request is stopped after a few copies and no call is left to run
    from pi_notebook.ai.types import Tool
    from pi_notebook.local import provider

    monkeypatch.setattr(provider, "PACKAGED_MODELS", {**provider.PACKAGED_MODELS, fake.model_id: None})
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_TOOLCALLS", "grammar")
    line = "df['total'] = df['total'].fillna(0)\\n"  # as the JSON string carries it
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS", json.dumps(
        ['{"name": "python", "arguments": {"code": "', *[line[:18], line[18:]] * 500, '"}}']))
    monkeypatch.setenv("FAKE_LLAMA_STREAM_S", "20")
    tool = Tool(name="python", description="Run Python code in the notebook.",
                parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})
    answer = await complete(fake.model, Context(messages=[UserMessage(content="fill the gaps")], tools=[tool]))
    assert answer.stop_reason == "length" and "repeating the same code" in answer.error_message
    assert not [b for b in answer.content if b.type == "toolCall"]
    deadline = time.monotonic() + 20
    while not fake.dropped() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert fake.dropped() and fake.dropped()[0] < 100  # the request was stopped, not read to its end


async def test_a_reply_without_a_loop_is_untouched(fake, monkeypatch):
    rows = [f"| Bath | {n} |\n" for n in range(40)]  # similar rows, no loop
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS", json.dumps(["| city | n |\n|---|---|\n", *rows]))
    answer = await _ask(fake.model)
    assert answer.stop_reason == "stop"
    assert _text(answer) == "| city | n |\n|---|---|\n" + "".join(rows)


async def test_a_server_that_dies_mid_answer_is_explained_and_starts_again(fake, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_DIE_AFTER", "2")
    cut = await _ask(fake.model)
    assert cut.stop_reason == "error"
    said, _, technical = cut.error_message.partition("Technical detail: ")
    assert said.startswith("The local model server stopped while answering; it starts again with the next "
                           "request"), cut.error_message
    assert "127.0.0.1" not in said and "chunked" not in said
    assert "lost while reading the response" in technical
    monkeypatch.delenv("FAKE_LLAMA_DIE_AFTER")
    again = await _ask(fake.model)  # the next request starts the server again
    assert again.stop_reason == "stop", again.error_message
    assert _text(again) == "Hello from the fake server."


async def test_the_request_asks_for_the_prompt_cache_and_reports_how_far_the_prompt_was_read(
        fake, monkeypatch):
    from pi_notebook.ai.types import PromptProgress

    monkeypatch.setenv("FAKE_LLAMA_PROMPT", "[5400, 1200]")
    seen: list[PromptProgress] = []
    answer = await _ask(fake.model, on_progress=seen.append)
    assert answer.stop_reason == "stop", answer.error_message
    assert _text(answer) == "Hello from the fake server."  # the progress chunks are no text
    assert seen == [PromptProgress(5400, 1200, 1200 + 4200 * k // 3, 40 * k) for k in (1, 2, 3)]
    assert (seen[0].read, seen[0].to_read) == (1400, 4200) and seen[-1].read == seen[-1].to_read
    body = fake.requests()[-1]["body"]
    assert body["cache_prompt"] is True and body["return_progress"] is True


async def test_a_slow_start_is_announced_once_and_a_running_server_says_nothing(fake, monkeypatch):
    from pi_notebook.local.provider import STARTING_TEXT

    monkeypatch.setenv("FAKE_LLAMA_HEALTH_DELAY", "2.5")
    said: list[str] = []
    first = await _ask(fake.model, on_status=said.append)
    assert first.stop_reason == "stop", first.error_message
    assert said == [STARTING_TEXT]
    second = await _ask(fake.model, on_status=said.append)  # the server is up: nothing to say
    assert second.stop_reason == "stop" and said == [STARTING_TEXT]

"""CPU overhead of ``stream()`` (openai-completions) over the cheapest possible client.

One local server (a separate process, so its CPU time is not counted here) serves three
OpenAI-compatible SSE bodies shaped like llama-server's chunks:

* 2,000 text deltas, * 20,000 text deltas, * one tool call whose arguments arrive in 200 fragments
  (written in 64 KiB pieces: many deltas per network read),
* 1,000 text deltas paced like a model server (one SSE event per write, 0.5 ms apart: one
  delta per network read, so what every read costs shows up per token),

plus a 3-delta body: the fixed cost of one request (also used to compare the shared per-loop
client with a new client per request).

For each, in one run and interleaved, it measures ``time.process_time()`` of

* the floor: raw ``httpx`` (a shared AsyncClient) + ``json.loads`` of every ``data:`` line
  (``response.aiter_lines()``), doing nothing with the result;
* ``stream()``: the full adapter (SSE decoding, chunk mapping, the live partial message, one
  event object per delta) consumed with ``async for``.

It prints the median CPU time of each, the ratio (target: <= 1.0 on the text workloads)
and the 20k/2k ratio of
``stream()`` (about 10 means linear: no per-delta work that grows with the message).

A third column, **minimum**, is the floor plus the one object pi's protocol requires per delta:
a ``*_delta`` event on a live partial message, built with the slot setters of
``pi_notebook.ai._fast`` (the cheapest construction this package has). minimum/floor - 1 is that
event's cost as a share of the floor, i.e. how much of the 0.15 allowance it takes by itself.

Each ratio is compared with the one recorded in ``bench/recorded_ratios.json`` (the last
accepted run): a ratio more than ``--tolerance`` (default 25 %: two runs of the same code on
a loaded 2-core machine differ by up to about 20 %; a real regression measured
+60 %) above its recorded value prints a ``WORSE than recorded`` line and the script exits
with status 1. ``--record`` stores this run's ratios as the new reference
(after a change that is meant to move them; say so in the commit).

    /work/venv/bin/python bench/stream_overhead.py [--reps N] [--record] [--tolerance 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pi_notebook.ai import _http  # noqa: E402
from pi_notebook.ai.stream import stream  # noqa: E402
from pi_notebook.ai._fast import (  # noqa: E402
    SET_EXTRA, SET_FIELDS_SET, SET_MODEL_DICT, SET_PRIVATE, new_instance,
)
from pi_notebook.ai.types import (  # noqa: E402
    AssistantMessage, Context, Model, TextContent, TextDeltaEvent, ToolCallDeltaEvent, UserMessage,
)

WORDS = ["The", " sea", " is", " deep", " and", " full", " of", " life", ",", " fish", " swim", "."]


def _chunk(delta: dict, finish: str | None = None) -> str:
    payload = {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], "created": 1795998014,
               "id": "chatcmpl-bo5egteOXriJQG5WUDFFw3uqAGSltcRN", "model": "bench-model",
               "system_fingerprint": "b0-unknown", "object": "chat.completion.chunk"}
    return "data: " + json.dumps(payload, separators=(",", ":")) + "\n\n"


def _tail(finish: str) -> str:
    usage = {"choices": [], "id": "chatcmpl-x", "model": "bench-model", "object": "chat.completion.chunk",
             "usage": {"completion_tokens": 10, "prompt_tokens": 10, "total_tokens": 20}}
    return _chunk({}, finish) + "data: " + json.dumps(usage) + "\n\ndata: [DONE]\n\n"


def text_body(n: int) -> bytes:
    parts = [_chunk({"role": "assistant", "content": None})]
    parts += [_chunk({"content": WORDS[i % len(WORDS)]}) for i in range(n)]
    return ("".join(parts) + _tail("stop")).encode()


def tool_body(fragments: int) -> bytes:
    args = json.dumps({"path": "notes/plan.md", "content": " ".join(f"line {i}" for i in range(fragments * 2))})
    size = -(-len(args) // fragments)
    pieces = [args[i:i + size] for i in range(0, len(args), size)]
    parts = [_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "write", "arguments": pieces[0]}}]})]
    parts += [_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces[1:]]
    return ("".join(parts) + _tail("tool_calls")).encode()


async def floor_run(client: httpx.AsyncClient, url: str) -> int:
    count = 0
    async with client.stream("POST", url, json={"model": "bench-model", "stream": True}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                count += 1
    return count


async def minimum_run(client: httpx.AsyncClient, url: str, on_event=None) -> int:
    """The floor plus one event per delta on a live partial message (see the docstring).

    ``on_event(event, partial)``, when given, is awaited per delta: loop_overhead.py adds the
    Agent's required per-delta work there."""
    partial = AssistantMessage(content=[TextContent(text="")], stop_reason="pending")
    fields = partial.content[0].__dict__
    count = 0
    async with client.stream("POST", url, json={"model": "bench-model", "stream": True}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                count += 1
                choices = chunk.get("choices")
                delta = choices[0].get("delta") if choices else None
                if not delta:
                    continue
                if "content" in delta:
                    text = delta["content"] or ""
                    so_far = fields["text"]
                    fields["text"] = ""  # sole reference: CPython appends in place
                    so_far += text
                    fields["text"] = so_far
                    event = new_instance(TextDeltaEvent)
                    SET_MODEL_DICT(event, {"type": "text_delta", "content_index": 0, "delta": text,
                                           "partial": partial})
                else:
                    event = new_instance(ToolCallDeltaEvent)
                    SET_MODEL_DICT(event, {
                        "type": "toolcall_delta", "content_index": 0,
                        "delta": delta["tool_calls"][0]["function"]["arguments"], "partial": partial})
                SET_FIELDS_SET(event, {"content_index", "delta", "partial"})
                SET_EXTRA(event, None)
                SET_PRIVATE(event, None)
                if on_event is not None:
                    await on_event(event, partial)
    return count


async def stream_run(model: Model, context: Context) -> int:
    s = stream(model, context, api_key="bench-key")
    count = 0
    async for _event in s:
        count += 1
    message = await s.result()
    assert message.stop_reason in ("stop", "toolUse"), message.error_message
    return count


async def _requests(url: str, n: int, fresh: bool) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        if fresh:
            async with httpx.AsyncClient() as one_off:
                async with one_off.stream("POST", url, json={}) as response:
                    await response.aread()
        else:
            async with _http.open_stream("POST", url, json_body={}) as response:
                await response.read_text()
    return time.process_time() - cpu, time.perf_counter() - wall


RECORDED = ROOT / "bench" / "recorded_ratios.json"


def check_recorded(bench: str, ratios: dict[str, float], record: bool, tolerance: float) -> int:
    """Compare ``ratios`` with the recorded ones of ``bench``; print the verdict per ratio.

    Returns the exit status: 1 when a ratio is worse than recorded by more than ``tolerance``
    (relative), else 0. With ``record`` the ratios replace the recorded ones instead."""
    data = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    if record:
        data[bench] = {"recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                       "python": platform.python_version(),
                       "ratios": {k: round(v, 3) for k, v in ratios.items()}}
        RECORDED.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        print(f"recorded these ratios as the reference in {RECORDED.relative_to(ROOT)}")
        return 0
    recorded = data.get(bench, {}).get("ratios", {})
    if not recorded:
        print(f"no recorded ratios for {bench} in {RECORDED.relative_to(ROOT)}: run with --record")
        return 0
    worse = []
    print(f"against the recorded ratios ({data[bench].get('recorded', '?')}; tolerance {tolerance:.0%}):")
    for name, ratio in ratios.items():
        before = recorded.get(name)
        if before is None:
            print(f"  {name}: {ratio:.2f} (not recorded yet)")
            continue
        change = ratio / before - 1
        verdict = "WORSE" if change > tolerance else "ok"
        print(f"  {name}: {ratio:.2f} vs recorded {before:.2f} ({change:+.0%}) {verdict}")
        if change > tolerance:
            worse.append(f"{name}: {ratio:.2f} > {before:.2f} recorded ({change:+.0%})")
    for line in worse:
        print(f"WORSE than recorded: {bench} {line}")
    if worse:
        print(f"FAILED: {len(worse)} ratio(s) WORSE than recorded (rerun on a quieter machine to rule "
              "out noise; --record only after a change meant to move them)")
        return 1
    return 0


async def measure(base: str, reps: int) -> dict[str, float]:
    context = Context(messages=[UserMessage(content="Tell me about the sea.")])
    client = httpx.AsyncClient(timeout=60)
    workloads = [("2,000 text deltas", 0, 2000), ("20,000 text deltas", 1, 20000),
                 ("200-fragment tool call", 2, 200), ("3 text deltas (per-request)", 3, 3),
                 ("1,000 deltas, 1 per read", 4, 1000)]
    results: dict[str, tuple[float, float, float]] = {}
    for label, index, _n in workloads:
        url = f"{base}/{index}/v1/chat/completions"
        model = Model(id="bench-model", api="openai-completions", provider="openai",
                      base_url=f"{base}/{index}/v1")
        # warm up both paths (connections, imports, caches)
        await floor_run(client, url)
        await minimum_run(client, url)
        await stream_run(model, context)
        floor_times, minimum_times, ours_times = [], [], []
        for _ in range(reps):
            t0 = time.process_time()
            await floor_run(client, url)
            floor_times.append(time.process_time() - t0)
            t0 = time.process_time()
            await minimum_run(client, url)
            minimum_times.append(time.process_time() - t0)
            t0 = time.process_time()
            await stream_run(model, context)
            ours_times.append(time.process_time() - t0)
        results[label] = (statistics.median(floor_times), statistics.median(minimum_times),
                          statistics.median(ours_times))
    # Connection reuse: the shared per-loop client vs a new client (new TCP connection) per request.
    small = f"{base}/3/v1/chat/completions"
    shared_cpu, shared_wall = await _requests(small, 100, fresh=False)
    fresh_cpu, fresh_wall = await _requests(small, 100, fresh=True)
    await client.aclose()
    await _http.aclose_clients()

    print(f"{'workload':<28}{'floor (ms)':>12}{'minimum (ms)':>14}{'stream() (ms)':>15}{'ratio':>8}"
          f"{'minimum/floor':>15}")
    for label, (floor, minimum, ours) in results.items():
        print(f"{label:<28}{floor * 1000:>12.2f}{minimum * 1000:>14.2f}{ours * 1000:>15.2f}"
              f"{ours / floor:>8.2f}{minimum / floor:>15.2f}")
    small, large = results["2,000 text deltas"][2], results["20,000 text deltas"][2]
    print(f"stream() 20k / 2k CPU time: {large / small:.2f} (linear = 10)")
    print("target: ratio <= 1.0 on the 2,000 and 20,000 text deltas")
    print(f"100 small requests, shared client: {shared_cpu * 10:.2f} ms CPU / {shared_wall * 10:.2f} ms wall "
          f"per request; new client each time: {fresh_cpu * 10:.2f} ms CPU / {fresh_wall * 10:.2f} ms wall")
    return {f"stream()/floor, {label}": ours / floor for label, (floor, _m, ours) in results.items()}


class Paced:
    """A body the server sends one SSE event per write, 0.5 ms apart (sse_server's ``paced:``)."""

    def __init__(self, body: bytes) -> None:
        self.body = body


@contextlib.contextmanager
def serving(bodies: list, command: list[str]):
    """Write ``bodies`` to files, start ``command + files`` (a server printing its base URL
    on its first line) in its own process, so its CPU time is not counted, and yield the URL.
    A ``Paced`` body is passed as ``paced:FILE``."""
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, body in enumerate(bodies):
            paced = isinstance(body, Paced)
            path = Path(tmp) / f"body{i}.sse"
            path.write_bytes(body.body if paced else body)
            files.append(("paced:" if paced else "") + str(path))
        server = subprocess.Popen([*command, *files], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            base = server.stdout.readline().strip()
            if not base.startswith("http://127.0.0.1:"):
                raise SystemExit(f"benchmark server did not start: {base!r}")
            yield base
        finally:
            server.terminate()
            server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--record", action="store_true",
                        help="store this run's ratios as the reference in bench/recorded_ratios.json")
    parser.add_argument("--tolerance", type=float, default=0.25,
                        help="relative rise over a recorded ratio that counts as worse (default 0.25)")
    args = parser.parse_args()
    bodies = [text_body(2000), text_body(20000), tool_body(200), text_body(3), Paced(text_body(1000))]
    with serving(bodies, [sys.executable, str(ROOT / "tests" / "ai" / "sse_server.py")]) as base:
        ratios = asyncio.run(measure(base, args.reps))
    sys.exit(check_recorded("stream_overhead", ratios, args.record, args.tolerance))


if __name__ == "__main__":
    main()

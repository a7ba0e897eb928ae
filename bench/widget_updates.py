"""Widget traffic of a 10,000-delta assistant stream: AgentView vs naive updates.

Counts the comm messages and JSON bytes a frontend would receive (comms are
replaced by a recorder, so no kernel is needed) for:

- naive: one ``HTML.value = rendered Markdown of the text so far`` per delta
  (what a straightforward implementation does; quadratic, so only 2,000 deltas);
- naive-raw: one ``HTML.value += delta`` per delta (no Markdown at all);
- AgentView: the real view (coalesced 50 ms flushes, frozen chunks).

Run: ``python bench/widget_updates.py [--deltas N] [--rate R]`` where R is deltas per
second (0 = as fast as possible). Prints comm messages (opens + updates), state updates per second, bytes and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import comm
from comm import DummyComm


class _Recorder:
    def __init__(self) -> None:
        self.messages = 0
        self.updates = 0
        self.bytes = 0

    def install(self) -> None:
        recorder = self

        class RecordingComm(DummyComm):
            def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                            buffers: Any = None, **keys: Any) -> None:
                recorder.messages += 1
                if msg_type == "comm_msg" and isinstance(data, dict) and data.get("method") == "update":
                    recorder.updates += 1
                recorder.bytes += len(json.dumps(data, default=str))

        comm.create_comm = lambda *a, **k: RecordingComm(*a, **k)


def _deltas(n: int) -> list[str]:
    # Markdown-ish text: words, some bold, a paragraph break every 80 tokens.
    return [(f"**tok{i}** " if i % 17 == 0 else f"tok{i} ") + ("\n\n" if i % 80 == 79 else "")
            for i in range(n)]


async def _pace(i: int, rate: float, t0: float) -> None:
    if rate <= 0:
        if i % 100 == 99:
            await asyncio.sleep(0)
        return
    target = t0 + (i + 1) / rate
    delay = target - time.monotonic()
    if delay > 0.002:
        await asyncio.sleep(delay)


async def run_naive(deltas: list[str], rate: float, markdown: bool) -> tuple[int, int, int, float]:
    import ipywidgets as W

    from pi_notebook.widgets.markdown import render_markdown

    rec = _Recorder()
    rec.install()
    html = W.HTML()
    text = ""
    t0 = time.monotonic()
    for i, delta in enumerate(deltas):
        text += delta
        html.value = render_markdown(text) if markdown else text
        await _pace(i, rate, t0)
    return rec.messages, rec.updates, rec.bytes, time.monotonic() - t0


async def run_view(deltas: list[str], rate: float) -> tuple[int, int, int, float]:
    from pi_notebook.agent.types import MessageStartEvent, MessageUpdateEvent
    from pi_notebook.ai.types import AssistantMessage, TextContent, TextDeltaEvent, TextStartEvent
    from pi_notebook.widgets.view import AgentView

    rec = _Recorder()
    rec.install()
    view = AgentView("bench", asyncio.get_running_loop(), on_abort=lambda: None)
    partial = AssistantMessage(content=[TextContent(text="")])
    view.handle_event(MessageStartEvent(message=partial))
    view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(
        content_index=0, partial=partial)))
    start_messages, start_updates, start_bytes = rec.messages, rec.updates, rec.bytes
    t0 = time.monotonic()
    for i, delta in enumerate(deltas):
        view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(
            content_index=0, delta=delta, partial=partial)))
        await _pace(i, rate, t0)
    view.finish("done")
    elapsed = time.monotonic() - t0
    view.close()
    return rec.messages - start_messages, rec.updates - start_updates, rec.bytes - start_bytes, elapsed


async def per_event_cost(n: int = 50_000) -> tuple[float, float]:
    """Mean handle_event time (µs) for the first and the last 5,000 deltas of a long
    stream, with flushes running: equal numbers mean the per-event cost is O(delta)."""
    from pi_notebook.agent.types import MessageStartEvent, MessageUpdateEvent
    from pi_notebook.ai.types import AssistantMessage, TextContent, TextDeltaEvent, TextStartEvent
    from pi_notebook.widgets.view import AgentView

    _Recorder().install()
    view = AgentView("bench", asyncio.get_running_loop(), on_abort=lambda: None)
    partial = AssistantMessage(content=[TextContent(text="")])
    view.handle_event(MessageStartEvent(message=partial))
    view.handle_event(MessageUpdateEvent(message=partial, assistant_message_event=TextStartEvent(
        content_index=0, partial=partial)))
    events = [MessageUpdateEvent(message=partial, assistant_message_event=TextDeltaEvent(
        content_index=0, delta=d, partial=partial)) for d in _deltas(n)]
    spent = [0.0] * n
    for i, event in enumerate(events):
        t = time.perf_counter()
        view.handle_event(event)
        spent[i] = time.perf_counter() - t
        if i % 200 == 199:
            await asyncio.sleep(0.001)  # let flushes run, as they would in a kernel
    view.finish("done")
    view.close()
    k = 5000
    return sum(spent[:k]) / k * 1e6, sum(spent[-k:]) / k * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1000.0, help="deltas per second (0 = burst)")
    args = parser.parse_args()
    deltas = _deltas(args.deltas)
    print(f"{args.deltas:,} deltas, {len(''.join(deltas)):,} characters, "
          f"rate {'burst' if args.rate <= 0 else f'{args.rate:.0f}/s'}")
    rows = [
        ("naive-raw (value += delta)", await run_naive(deltas, args.rate, markdown=False)),
        # quadratic: limited to the first 2,000 deltas so the bench ends in reasonable time
        (f"naive (re-render Markdown, {min(len(deltas), 2000):,} deltas)",
         await run_naive(deltas[:2000], args.rate, markdown=True)),
        ("AgentView (coalesced, frozen chunks)", await run_view(deltas, args.rate)),
    ]
    print(f"{'mode':40} {'messages':>9} {'updates':>8} {'upd/s':>6} {'MB sent':>9} {'wall s':>7}")
    for name, (messages, updates, nbytes, elapsed) in rows:
        print(f"{name:40} {messages:9,} {updates:8,} {updates / elapsed:6.1f} {nbytes / 1e6:9.2f} {elapsed:7.2f}")
    view_msgs, view_bytes = rows[2][1][0], rows[2][1][2]
    name, (messages, _u, nbytes, _e) = rows[0]
    print(f"ratio {name} / AgentView: {messages / max(1, view_msgs):.0f}x messages, "
          f"{nbytes / max(1, view_bytes):.0f}x bytes")
    first, last = await per_event_cost()
    print(f"handle_event cost: first 5k deltas {first:.1f} µs/event, last 5k of 50k "
          f"(~400k chars in) {last:.1f} µs/event, ratio {last / first:.2f}")

if __name__ == "__main__":
    asyncio.run(main())

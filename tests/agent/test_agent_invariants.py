"""Invariants over many generated Agent runs (a seeded generator, a few hundred scenarios).

Each scenario scripts a random mix of assistant turns (text, tool batches, ``length``
stops, provider errors), tools (succeeding, raising, terminating, missing, invalid
arguments, slow, sending updates, some late), sequential or parallel execution,
steering and follow-up messages queued from listeners and tools, and an abort at a
random event or inside a tool. After each run:

- the event sequence is well nested: ``agent_start`` first and ``agent_end`` last
  (once each), turns alternate and contain every message and tool event, each
  message starts and ends once, each tool execution starts before it ends, its
  updates fall in between, and all of a turn's tool executions end before its
  ``turn_end``;
- ``turn_end.tool_results`` are the tool-result messages of that turn, in the source
  order of the calls;
- every ``toolCall`` in the transcript is followed by exactly one ``toolResult``,
  except after an abort, where calls cut off by the batch break may have none;
- the transcript grew by exactly ``agent_end.messages``; ``wait_for_idle`` returns;
  the state is idle; no asyncio task is left pending.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from agent_helpers import MODEL, MockStream, assistant, call, make_tool, pending_tasks, text

from pi_notebook.agent import Agent, AgentTool, AgentToolResult

SCENARIOS = 320
BATCHES = 8

INT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOL_KINDS = ["ok", "fail", "terminate", "slow", "updates", "late_update", "missing", "invalid",
              "abort"]


class Scenario:
    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.seed = seed
        self.rng = rng
        self.tool_execution = rng.choice(["sequential", "parallel"])
        self.sequential_tool = rng.random() < 0.2
        self.streaming = rng.random() < 0.4
        self.steering_mode = rng.choice(["one-at-a-time", "all"])
        self.follow_up_mode = rng.choice(["one-at-a-time", "all"])
        self.abort_at_event = rng.randrange(4, 60) if rng.random() < 0.25 else None
        self.steer_at = {rng.randrange(2, 40) for _ in range(rng.randrange(0, 3))}
        self.follow_up_at = {rng.randrange(2, 40) for _ in range(rng.randrange(0, 3))}
        self.async_listener = rng.random() < 0.5
        self.calls = 0
        self.steps = [self.make_step(i) for i in range(rng.randrange(1, 6))]

    def make_step(self, index: int) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            return assistant(f"answer {index}")
        if roll < 0.35:
            return assistant([text("partial")], stop_reason="error", error_message="provider failed")
        calls = []
        for j in range(rng.randrange(1, 4)):
            kind = rng.choice(TOOL_KINDS)
            self.calls += 1
            args: dict[str, Any] = {"n": rng.randrange(5)}
            if kind == "invalid":
                args = {"n": "not a number"}
            name = {"missing": "no_such_tool", "invalid": "ok"}.get(kind, kind)
            calls.append(call(f"s{self.seed}-t{index}-{j}", name, args))
        stop = "length" if rng.random() < 0.08 else "toolUse"
        return assistant(calls, stop_reason=stop)

    def tools(self, agent_ref: list[Agent]) -> list[AgentTool]:
        rng = random.Random(self.seed * 7919)

        def build(kind: str) -> AgentTool:
            async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any
                              ) -> AgentToolResult:
                for _ in range(rng.randrange(0, 3)):
                    await asyncio.sleep(0)
                if kind == "fail":
                    raise RuntimeError("tool failed")
                if kind == "slow":
                    await asyncio.sleep(0.001 * rng.randrange(0, 3))
                if kind in ("updates", "late_update"):
                    on_update(AgentToolResult(content=[text("progress")]))
                    await asyncio.sleep(0)
                    on_update(AgentToolResult(content=[text("more")]))
                if kind == "late_update":
                    asyncio.get_running_loop().call_soon(
                        on_update, AgentToolResult(content=[text("late")]))
                if kind == "abort":
                    agent_ref[0].abort()
                if rng.random() < 0.1:
                    agent_ref[0].steer(f"steer from {tool_call_id}")
                return AgentToolResult(content=[text(f"{kind} done")], details={"n": params["n"]},
                                       terminate=kind == "terminate")

            mode = "sequential" if (self.sequential_tool and kind == "slow") else None
            return make_tool(kind, execute, parameters=INT_SCHEMA, execution_mode=mode)

        return [build(k) for k in ("ok", "fail", "terminate", "slow", "updates", "late_update",
                                   "abort")]


def check_nesting(events: list[Any], seed: int) -> None:
    kinds = [e.type for e in events]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end", seed
    assert kinds.count("agent_start") == 1 and kinds.count("agent_end") == 1, seed
    in_turn = False
    open_message: Any = None
    open_tools: dict[str, int] = {}
    ended_tools: set[str] = set()
    turn_results: list[Any] = []
    for event in events[1:-1]:
        kind = event.type
        if kind == "turn_start":
            assert not in_turn, (seed, "nested turn")
            in_turn, turn_results = True, []
            continue
        assert in_turn, (seed, f"{kind} outside a turn")
        if kind == "turn_end":
            assert open_message is None and not open_tools, (seed, "turn ended with open work")
            assert event.tool_results == turn_results, (seed, "turn_end.tool_results")
            in_turn = False
        elif kind == "message_start":
            assert open_message is None, (seed, "nested message")
            open_message = event.message
        elif kind == "message_update":
            assert open_message is not None and open_message.role == "assistant", seed
        elif kind == "message_end":
            assert open_message is not None, (seed, "message_end without start")
            if event.message.role == "toolResult":
                assert event.message is open_message, seed
                turn_results.append(event.message)
            open_message = None
        elif kind == "tool_execution_start":
            assert event.tool_call_id not in open_tools and event.tool_call_id not in ended_tools
            open_tools[event.tool_call_id] = 1
        elif kind == "tool_execution_update":
            assert event.tool_call_id in open_tools, (seed, "update outside its execution")
        elif kind == "tool_execution_end":
            assert open_tools.pop(event.tool_call_id, None) == 1, (seed, "end without start")
            ended_tools.add(event.tool_call_id)
        else:  # pragma: no cover
            raise AssertionError((seed, kind))
    assert not in_turn, (seed, "last turn not ended")


def check_transcript(messages: list[Any], aborted: bool, seed: int) -> None:
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        call_ids = [b.id for b in message.content if b.type == "toolCall"]
        results = []
        for later in messages[i + 1:]:
            if later.role != "toolResult":
                break
            results.append(later.tool_call_id)
        if message.stop_reason in ("error", "aborted"):
            assert results == [], seed
            continue
        if aborted:
            # a batch cut short by abort: a source-order prefix (sequential) or any
            # source-ordered subset that preflight reached (parallel)
            assert all(r in call_ids for r in results), seed
            assert results == [c for c in call_ids if c in results], seed
        else:
            assert results == call_ids, (seed, results, call_ids)


def check_queue_delivery(events: list[Any], seed: int) -> None:
    # tool results always follow their assistant message inside the same turn
    last_assistant_calls: list[str] = []
    for event in events:
        if event.type == "message_end" and event.message.role == "assistant":
            last_assistant_calls = [b.id for b in event.message.content if b.type == "toolCall"]
        if event.type == "message_end" and event.message.role == "toolResult":
            assert event.message.tool_call_id in last_assistant_calls, seed


async def run_scenario(seed: int) -> None:
    scenario = Scenario(seed)
    stream = MockStream(*scenario.steps, streaming=scenario.streaming,
                        default=assistant("final answer"))
    agent_ref: list[Agent] = []
    agent = Agent(initial_state={"model": MODEL}, stream_fn=stream,
                  tool_execution=scenario.tool_execution, steering_mode=scenario.steering_mode,
                  follow_up_mode=scenario.follow_up_mode)
    agent_ref.append(agent)
    agent.state.tools = scenario.tools(agent_ref)
    events: list[Any] = []
    aborted = [False]

    async def listener(event: Any, signal: Any) -> None:
        index = len(events)
        events.append(event)
        if scenario.async_listener:
            await asyncio.sleep(0)
        if index == scenario.abort_at_event:
            agent.abort()
        if index in scenario.steer_at:
            agent.steer(f"steer at {index}")
        if index in scenario.follow_up_at:
            agent.follow_up(f"follow up at {index}")
        aborted[0] = signal.aborted

    agent.subscribe(listener)
    before = len(agent.state.messages)
    await asyncio.wait_for(agent.prompt("start"), timeout=10)
    await asyncio.wait_for(agent.wait_for_idle(), timeout=1)

    check_nesting(events, seed)
    check_queue_delivery(events, seed)
    transcript = agent.state.messages
    assert transcript[before:] == events[-1].messages, seed
    check_transcript(transcript, aborted[0], seed)
    if not aborted[0]:
        assert all(m.stop_reason != "aborted" for m in transcript if m.role == "assistant"), seed
    state = agent.state
    assert state.is_streaming is False and state.pending_tool_calls == set(), seed
    assert state.streaming_message is None and agent.signal is None, seed
    # late updates and mock producers finish within a few loop turns; nothing may linger
    for _ in range(5):
        await asyncio.sleep(0)
    assert pending_tasks() == [], seed


@pytest.mark.parametrize("batch", range(BATCHES))
async def test_generated_scenarios_keep_invariants(batch):
    per_batch = SCENARIOS // BATCHES
    for seed in range(batch * per_batch, (batch + 1) * per_batch):
        await run_scenario(seed)


def test_generator_covers_the_interesting_cases():
    """The seeds above do exercise aborts, steering, follow-ups and every tool kind."""
    scenarios = [Scenario(seed) for seed in range(SCENARIOS)]
    assert sum(s.abort_at_event is not None for s in scenarios) > 40
    assert sum(bool(s.steer_at) for s in scenarios) > 100
    assert sum(bool(s.follow_up_at) for s in scenarios) > 100
    names = {b.name for s in scenarios for step in s.steps if not callable(step)
             for b in step.content if b.type == "toolCall"}
    assert names >= {"ok", "fail", "terminate", "slow", "updates", "late_update", "no_such_tool",
                     "abort"}
    assert {s.tool_execution for s in scenarios} == {"sequential", "parallel"}

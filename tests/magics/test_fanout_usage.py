"""The context meter of a run's view reads the tokens of the latest assistant message from
the one place usage is summed (``ai.types.usage_total_tokens``), as the Transcript does."""

from __future__ import annotations

from types import SimpleNamespace

from magics_helpers import FakeView

from pi_notebook.agent.types import MessageEndEvent
from pi_notebook.ai.types import AssistantMessage, Usage, usage_total_tokens
from pi_notebook.magics.fanout import EventFanout
from pi_notebook.widgets.transcript import Transcript


def _fanout(view: FakeView, logs: list[str]) -> EventFanout:
    run = SimpleNamespace(view=view)
    return EventFanout(serving=lambda: run, queue=SimpleNamespace(delivered=lambda message: None),
                       autosave=SimpleNamespace(message_ended=lambda message: None),
                       context_window=lambda: 1000, log=logs.append)


def test_the_context_meter_and_the_transcript_read_the_same_usage_total():
    view, logs = FakeView("faux/test", None, None, None), []
    fanout = _fanout(view, logs)
    given = AssistantMessage(usage=Usage(input=10, output=5, cache_read=3, total_tokens=40))  # provider's total
    summed = AssistantMessage(usage=Usage(input=10, output=5, cache_read=3, cache_write=2))  # left 0: summed
    for message in (given, summed):
        fanout(MessageEndEvent(message=message))
    assert logs == []
    assert view.kinds("context") == [("context", 40, 1000), ("context", 20, 1000)]
    for message in (given, summed):
        t = Transcript("faux/test")
        t.apply(MessageEndEvent(message=message))
        assert t.context_used == usage_total_tokens(message.usage)

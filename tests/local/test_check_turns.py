"""A run check's corrective turn is typed as the product's (agent/types.CheckMessage): the model
reads the instruction, a person reads what was found and what the agent was asked."""

from __future__ import annotations

import pandas as pd
from test_checks import SALES, _call, _run

from pi_notebook.agent.types import CheckMessage
from pi_notebook.ai.providers.faux import faux_assistant_message
from pi_notebook.local.checks import check_message


def test_the_checks_of_a_run_are_check_messages_worded_for_a_person(monkeypatch):
    ns = {"pd": pd, "sales": SALES}
    agent, _ = _run("which product sold the most units?", [
        _call("sales.nlargest(1, 'unit')"),
        faux_assistant_message("The best seller is Apple."),
        _call("sales.nlargest(1, 'unitz')"),
        faux_assistant_message("It is Apple."),
        faux_assistant_message("The code failed ('unitz'), so I do not know the answer."),
    ], ns, monkeypatch)
    checks = [m for m in agent.state.messages if isinstance(m, CheckMessage)]
    assert len(checks) == 2 and all(m.role == "user" and m.author == "pi_notebook check" for m in checks)
    assert "Reply exactly: " in checks[1].content  # the model still gets its instruction
    assert [m.shown for m in checks] == [
        'No output shows "Apple": the agent was asked to state only values its code\'s output shows.',
        'No output shows "Apple" again: the agent was asked to end with what the results show.']


def test_every_kind_of_check_reads_without_the_models_instruction():
    for check in ("Check: `top3` does not exist. The code made `x` instead. Assign the result to `top3`.",
                  "Check: no figure was shown. Plot it with matplotlib and show the plot.",
                  "Check: the same call was sent again after it was not run. Reply exactly: It failed."):
        shown = check_message(check).shown
        assert not shown.startswith("Check") and "Reply exactly" not in shown and "Assign" not in shown
        assert shown.endswith(".") and not shown[0].islower()

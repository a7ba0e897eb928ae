"""The approval gate with the namespace review: protected names are asked for even under auto
and after "Always for this run"; the panel's request carries the reading of the code."""

from __future__ import annotations

import pandas as pd

from pi_notebook.agent.types import BeforeToolCallContext
from pi_notebook.ai.types import ToolCall
from pi_notebook.review.watch import NamespaceReview
from pi_notebook.tools.trust.approval import ApprovalRequest, make_approval_hook


def ctx(code: str) -> BeforeToolCallContext:
    call = ToolCall(id="call-1", name="python", arguments={"code": code})
    return BeforeToolCallContext(assistant_message=None, tool_call=call, args={"code": code}, context=None)


def gate(policy: str, answers: list[str], interactive: bool = True):
    asked: list[ApprovalRequest] = []

    async def ask(request: ApprovalRequest) -> str:
        asked.append(request)
        return answers.pop(0)

    hook = make_approval_hook(lambda: policy, ask, lambda: interactive)
    ns = {"df": pd.DataFrame({"a": [1]}), "other": 1}
    review = NamespaceReview()
    hook.preview = lambda code: review.preview(code, ns, ["df"])
    return hook, asked


async def test_a_protected_name_is_asked_for_under_auto_and_always():
    hook, asked = gate("auto", ["always", "run"])
    assert await hook(ctx("other = 2"), None) is None and asked == []  # not protected: auto
    assert await hook(ctx("df['a'] = 0"), None) is None
    assert asked[-1].extra["namespace"] == {"lines": ["changes `df['a'] = …` in `df`, which you created"],
                                            "undo": [], "protected": ["df"]}
    hook2, asked2 = gate("ask", ["always", "run"])
    await hook2(ctx("other = 3"), None)  # Always for this run
    await hook2(ctx("df.drop(columns=['a'], inplace=True)"), None)
    assert len(asked2) == 2  # the protected name is asked for even so


async def test_no_frontend_refuses_a_protected_change_under_auto_with_its_reason():
    hook, asked = gate("auto", [], interactive=False)
    result = await hook(ctx("del df"), None)
    assert result is not None and result.block and asked == []
    assert "which the user protects (AgentMagics.protect)" in result.reason

"""The approval policy names and their environment default, defined once.

Dependency-free on purpose: the magics' settings (``AgentMagics.approval``, ``--approve``)
read these at ``%load_ext``, which must not import the agent core that ``approval.py``
(the hook enforcing the policy) needs. ``approval.py`` re-exports them.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

__all__ = ["APPROVAL_ENV", "APPROVAL_POLICIES", "ApprovalPolicy", "default_policy"]

ApprovalPolicy = Literal["ask", "auto", "deny"]
APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = get_args(ApprovalPolicy)
APPROVAL_ENV = "PI_NOTEBOOK_APPROVAL"


def default_policy() -> ApprovalPolicy:
    """The policy from ``PI_NOTEBOOK_APPROVAL``, else ``ask``."""
    value = os.environ.get(APPROVAL_ENV, "").strip().lower()
    for policy in APPROVAL_POLICIES:
        if value == policy:
            return policy
    return "ask"

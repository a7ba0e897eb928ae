"""The approval vocabulary (policies, the panel's answers) and the policy's environment
default, defined once.

Dependency-free on purpose: the magics' settings (``AgentMagics.approval``, ``--approve``)
read these at ``%load_ext``, which must not import the agent core that ``approval.py``
(the hook enforcing the policy) needs. ``approval.py`` re-exports them.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

__all__ = ["APPROVAL_ENV", "APPROVAL_POLICIES", "ApprovalPolicy", "ApprovalChoice", "APPROVAL_CHOICES",
           "default_policy", "parse_policy"]

ApprovalPolicy = Literal["ask", "auto", "deny"]
APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = get_args(ApprovalPolicy)
APPROVAL_ENV = "PI_NOTEBOOK_APPROVAL"

# The approval panel's answers to one call ("always": for the rest of this run).
ApprovalChoice = Literal["run", "skip", "always"]
APPROVAL_CHOICES: tuple[ApprovalChoice, ...] = get_args(ApprovalChoice)


def parse_policy(value: str) -> ApprovalPolicy:
    """``value`` as a policy (case and surrounding space ignored); ``ValueError`` otherwise."""
    wanted = value.strip().lower()
    for policy in APPROVAL_POLICIES:
        if wanted == policy:
            return policy
    raise ValueError(f"must be one of {', '.join(APPROVAL_POLICIES)}, not {value!r}")


def default_policy() -> ApprovalPolicy:
    """The policy from ``PI_NOTEBOOK_APPROVAL``, else ``ask``."""
    try:
        return parse_policy(os.environ.get(APPROVAL_ENV, ""))
    except ValueError:
        return "ask"

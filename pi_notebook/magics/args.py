"""Argument parsing for ``%%agent``: small, strict, and one-line errors (the ``%agent``
subcommands are a registry beside their handlers, commands.py).

argparse prints usage and calls ``sys.exit``; inside a kernel that becomes a
traceback. Here every problem is a single-line ``UsageError`` that IPython shows
without a traceback.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from IPython.core.error import UsageError

from ..levels import AgentThinkingLevel, parse_thinking_level
from ..tools.trust.policy import APPROVAL_POLICIES, ApprovalPolicy, parse_policy

__all__ = ["AgentArgs", "parse_agent_args", "split_line", "AGENT_USAGE"]

AGENT_USAGE = ("%%agent [-m provider/model] [--base-url URL] [--thinking LEVEL] [--new] "
               f"[--wait | --no-wait] [--approve {'|'.join(APPROVAL_POLICIES)}] [--resume]")


@dataclass
class AgentArgs:
    model: str | None = None
    base_url: str | None = None
    thinking: AgentThinkingLevel | None = None
    new: bool = False
    wait: bool | None = None  # None: decide from AgentMagics.wait and the frontend
    approve: ApprovalPolicy | None = None
    resume: bool = False


_VALUE_OPTIONS = {"-m": "model", "--model": "model", "--base-url": "base_url",
                  "--thinking": "thinking", "--approve": "approve"}
# the options whose values are a vocabulary: parsed here, once, into their Literal
_PARSERS = {"thinking": parse_thinking_level, "approve": parse_policy}
_FLAG_OPTIONS = {"--new": ("new", True), "--wait": ("wait", True), "--no-wait": ("wait", False),
                 "--resume": ("resume", True)}


def split_line(line: str) -> list[str]:
    """The words of a magic's line, as a shell splits them (a one-line error for bad quotes)."""
    try:
        return shlex.split(line)
    except ValueError as exc:  # unbalanced quotes
        raise UsageError(f"%%agent: cannot parse arguments ({exc}). Usage: {AGENT_USAGE}") from None


def parse_agent_args(line: str) -> AgentArgs:
    """Parse the ``%%agent`` line. Raises a one-line ``UsageError``."""
    args = AgentArgs()
    tokens = split_line(line)
    seen_wait: str | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, inline = token.partition("=")
        if name in _VALUE_OPTIONS and (eq or token in _VALUE_OPTIONS):
            if eq:
                value = inline
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                i += 1
                value = tokens[i]
            else:
                raise UsageError(f"%%agent: {name} needs a value. Usage: {AGENT_USAGE}")
            if not value:
                raise UsageError(f"%%agent: {name} needs a value. Usage: {AGENT_USAGE}")
            attr = _VALUE_OPTIONS[name]
            if attr in _PARSERS:
                try:
                    value = _PARSERS[attr](value)
                except ValueError as exc:
                    raise UsageError(f"%%agent: {name} {exc}.") from None
            setattr(args, attr, value)
        elif token in _FLAG_OPTIONS:
            attr, flag = _FLAG_OPTIONS[token]
            if attr == "wait":
                if seen_wait is not None and seen_wait != token:
                    raise UsageError("%%agent: --wait and --no-wait exclude each other.")
                seen_wait = token
            setattr(args, attr, flag)
        elif token.startswith("-"):
            raise UsageError(f"%%agent: unknown option {token!r}. Usage: {AGENT_USAGE}")
        else:
            raise UsageError(f"%%agent: unexpected argument {token!r} (the prompt goes in the "
                             f"cell body). Usage: {AGENT_USAGE}")
        i += 1
    if args.resume and args.new:
        raise UsageError("%%agent: --resume and --new exclude each other.")
    return args

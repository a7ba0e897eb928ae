"""Argument parsing for the magics: small, strict, and one-line errors.

argparse prints usage and calls ``sys.exit``; inside a kernel that becomes a
traceback. Here every problem is a single-line ``UsageError`` that IPython shows
without a traceback.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from IPython.core.error import UsageError

from ..levels import AgentThinkingLevel, parse_thinking_level
from ..tools.policy import APPROVAL_POLICIES, ApprovalPolicy, parse_policy

__all__ = ["AgentArgs", "AgentCommand", "parse_agent_args", "parse_agent_command", "COMMANDS",
           "AGENT_USAGE"]

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


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:  # unbalanced quotes
        raise UsageError(f"%%agent: cannot parse arguments ({exc}). Usage: {AGENT_USAGE}") from None


def parse_agent_args(line: str) -> AgentArgs:
    """Parse the ``%%agent`` line. Raises a one-line ``UsageError``."""
    args = AgentArgs()
    tokens = _split(line)
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


# --- %agent <command> ---------------------------------------------------------------------

# command -> (number of arguments, argument name for messages, one-line description)
COMMANDS: dict[str, tuple[int, str, str]] = {
    "status": (0, "", "show the model, run state, queued messages and conversation size"),
    "abort": (0, "", "abort the running agent"),
    "reset": (0, "", "start a new conversation (aborts a running one)"),
    "model": (1, "ID", "switch the model, e.g. %agent model openai/gpt-4.1"),
    "history": (0, "", "show the conversation so far"),
    "sessions": (0, "", "list saved sessions of this directory"),
    "load": (1, "NAME|PATH", "restore a saved session into the agent"),
    "save": (1, "PATH", "write the conversation to a session file"),
    "export": (1, "PATH.ipynb", "write the conversation as a notebook"),
    "fix": (0, "", "explain and fix the error of your last cell"),
    "code": (0, "", "put the code the latest run ran into a new cell below"),
    # -1: its own sub-commands (magics/mcp_command.py)
    "mcp": (-1, "[tools|add|restart|off] ...", "MCP servers: list them; %agent mcp help for more"),
    "help": (0, "", "show this help"),
}


@dataclass
class AgentCommand:
    name: str
    arg: str | None = None
    rest: list[str] | None = None  # the words after a command with sub-commands


def parse_agent_command(line: str) -> AgentCommand:
    """Parse the ``%agent`` line magic: ``%agent`` alone is ``status``."""
    tokens = _split(line)
    if not tokens:
        return AgentCommand("status")
    name, rest = tokens[0].lower(), tokens[1:]
    if name not in COMMANDS:
        raise UsageError(f"%agent: unknown command {tokens[0]!r}; one of: {', '.join(COMMANDS)} "
                         "(%agent help).")
    count, arg_name, _ = COMMANDS[name]
    if count < 0:
        return AgentCommand(name, None, rest)
    if len(rest) != count:
        if count == 0:
            raise UsageError(f"%agent {name} takes no argument.")
        raise UsageError(f"%agent {name} needs exactly one argument: %agent {name} {arg_name}")
    return AgentCommand(name, rest[0] if rest else None)


def help_text() -> str:
    lines = [f"  {AGENT_USAGE}", "      the cell body is the prompt; one conversation per kernel",
             "  %steer TEXT        steer the running agent (delivered at the next turn)",
             "  %followup TEXT     queue a follow-up (delivered when the agent would stop)"]
    for name, (_, arg, description) in COMMANDS.items():
        usage = f"%agent {name} {arg}".rstrip()
        lines.append(f"  {usage:<18} {description}")
    return "\n".join(lines)

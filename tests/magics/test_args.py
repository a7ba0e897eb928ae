import pytest
from IPython.core.error import UsageError

from pi_notebook.magics.args import parse_agent_args
from pi_notebook.magics.commands import parse_agent_command


def test_defaults():
    args = parse_agent_args("")
    assert (args.model, args.base_url, args.thinking, args.new, args.wait, args.approve,
            args.resume) == (None, None, None, False, None, None, False)


def test_all_options():
    args = parse_agent_args("-m openai/gpt-4.1 --base-url http://127.0.0.1:8080/v1 --thinking HIGH "
                            "--new --no-wait --approve=auto")
    assert args.model == "openai/gpt-4.1"
    assert args.base_url == "http://127.0.0.1:8080/v1"
    assert args.thinking == "high"
    assert args.new is True and args.wait is False and args.approve == "auto"


def test_wait_flag_and_resume():
    args = parse_agent_args("--wait --resume")
    assert args.wait is True and args.resume is True


@pytest.mark.parametrize("line, fragment", [
    ("-m", "-m needs a value"),
    ("--thinking loud", "--thinking must be one of"),
    ("--approve maybe", "--approve must be one of"),
    ("--frobnicate", "unknown option '--frobnicate'"),
    ("hello there", "unexpected argument 'hello'"),
    ("--wait --no-wait", "exclude each other"),
    ("--new --resume", "exclude each other"),
    ("-m 'unclosed", "cannot parse arguments"),
])
def test_bad_arguments_are_one_line_usage_errors(line, fragment):
    with pytest.raises(UsageError) as info:
        parse_agent_args(line)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_commands():
    assert parse_agent_command("").name == "status"
    command = parse_agent_command("model faux/faux-1")
    assert (command.name, command.arg) == ("model", "faux/faux-1")
    assert parse_agent_command("ABORT").name == "abort"
    assert parse_agent_command("load 'my session.jsonl'").arg == "my session.jsonl"


@pytest.mark.parametrize("line, fragment", [
    ("explode", "unknown command 'explode'"),
    ("model", "needs exactly one argument"),
    ("abort now", "takes no argument"),
    ("export a.ipynb b.ipynb", "needs exactly one argument"),
])
def test_bad_commands(line, fragment):
    with pytest.raises(UsageError) as info:
        parse_agent_command(line)
    assert fragment in str(info.value) and "\n" not in str(info.value)


# --- run options: parsed once at the edge, one vocabulary each ------------------------------

def test_run_option_vocabularies_are_defined_once():
    from typing import get_args

    from pi_notebook import levels
    from pi_notebook.agent import types as agent_types
    from pi_notebook.ai import models, types as ai_types
    from pi_notebook.magics import config, settings
    from pi_notebook.tools.trust import approval, policy
    from pi_notebook.widgets import protocol

    assert config.THINKING_LEVELS is models.THINKING_LEVELS is ai_types.THINKING_LEVELS is levels.THINKING_LEVELS
    assert ai_types.AgentThinkingLevel is levels.AgentThinkingLevel
    assert protocol.ApprovalChoice is approval.ApprovalChoice is policy.ApprovalChoice
    assert not hasattr(approval, "Decision") and not hasattr(agent_types, "ToolExecution")
    assert get_args(config.WaitSetting) == config.WAIT_MODES == ("auto", "always", "never")
    # the settings snapshot carries the Literals, not bare strings
    hints = settings.RunSettings.__annotations__
    assert (hints["thinking"], hints["approval"], hints["wait"]) == (
        "AgentThinkingLevel", "ApprovalPolicy", "WaitSetting")


@pytest.mark.parametrize("parse, good, bad", [
    ("pi_notebook.levels:parse_thinking_level", (" HIGH ", "high"), "loud"),
    ("pi_notebook.tools.trust.policy:parse_policy", ("Auto", "auto"), "maybe"),
    ("pi_notebook.magics.config:parse_wait", ("NEVER", "never"), "sometimes"),
])
def test_each_vocabulary_has_one_parser(parse, good, bad):
    import importlib

    module, name = parse.split(":")
    fn = getattr(importlib.import_module(module), name)
    assert fn(good[0]) == good[1]
    with pytest.raises(ValueError, match="must be one of"):
        fn(bad)


async def test_the_approval_hook_takes_the_policy_as_parsed():
    # no second normalisation below the edge: a value that did not pass a parser (here a
    # policy in capitals) is not silently accepted, it fails closed
    from pi_notebook.agent.types import BeforeToolCallContext
    from pi_notebook.ai.types import ToolCall
    from pi_notebook.tools.trust.approval import make_approval_hook

    call = ToolCall(id="c1", name="python", arguments={"code": "1"})
    ctx = BeforeToolCallContext(assistant_message=None, tool_call=call, args={"code": "1"}, context=None)
    assert await make_approval_hook(lambda: "auto", None, lambda: True)(ctx, None) is None
    refused = await make_approval_hook(lambda: "AUTO", None, lambda: True)(ctx, None)
    assert refused is not None and refused.block and "Unknown approval policy" in refused.reason


# --- %agent: one registry for parsing, dispatch and help --------------------------------------

def test_every_subcommand_is_parsed_dispatched_and_helped_from_one_registry():
    from pi_notebook.magics import args, commands

    assert not hasattr(args, "COMMANDS")  # no second table
    help_lines = commands.help_text().splitlines()
    for name, spec in commands.COMMANDS.items():
        assert spec.name == name and callable(spec.handler)
        assert any(line.strip().startswith(f"%agent {name}") for line in help_lines), name
        words = {0: "", 1: " x"}.get(spec.arity, " a b c")
        parsed = parse_agent_command(name.upper() + words)
        assert parsed.name == name
        if spec.arity < 0:
            assert parsed.rest == ("a", "b", "c")


def test_dispatch_goes_through_the_registry(monkeypatch):
    from pi_notebook.magics import commands

    seen = []
    spec = commands.COMMANDS["mcp"]
    monkeypatch.setitem(commands.COMMANDS, "mcp", commands.Subcommand(
        spec.name, spec.arity, spec.arg, spec.help, lambda magics, command: seen.append(command)))
    commands.PiNotebookMagics._command(object(), "mcp tools web")
    assert seen == [commands.AgentCommand("mcp", rest=("tools", "web"))]

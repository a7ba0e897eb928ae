import pytest
from IPython.core.error import UsageError

from pi_notebook.magics.args import parse_agent_args, parse_agent_command


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

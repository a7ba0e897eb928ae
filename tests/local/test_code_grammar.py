"""Code reaches the kernel as the model wrote it: the GBNF of a call's ``code`` argument admits
the JSON encoding of every Python program, and the call the provider hands on carries exactly
that program.

llama.cpp ships no GBNF checker for Python, so ``GbnfMatcher`` compiles the (non-recursive) rules a
``code`` argument uses to a regular expression: literals, character classes, groups,
alternatives, ``* + ? {m,n}``.
"""

from __future__ import annotations

import json
import re

import pytest
from test_shared_server import fake  # noqa: F401  (the fixture: a fake llama-server, real supervisor)

from pi_notebook.ai import complete
from pi_notebook.ai.types import Context, Tool, UserMessage
from pi_notebook.local import provider
from pi_notebook.local.tool_calls import tools_grammar

PYTHON = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
TOOLS = [{"type": "function", "function": {"name": "python", "parameters": PYTHON}}]

# every kind of string literal Python admits, and code shapes a multi-step analysis needs
PROGRAMS = [
    "print('\\n'.join(['a', 'b']))",
    "print('a', 'b', sep='\\t')",
    "x = 1  # a comment, with a '#'\nprint(x)",
    'import re\nprint(re.findall(r"\\d+\\.\\d*", "v1.2 v3."))',
    "path = 'C:\\\\Users\\\\ana\\\\data.csv'\nprint(path)",
    "path = r'C:\\Users\\ana\\new'\nprint(path)",
    'doc = """two\nlines with "quotes" and \'single\' ones"""\nprint(doc)',
    "name = 'x'\nprint(f'{name!r}: {3.14159:.2f} {{braces}} {name + \"!\"}')",
    "print('a real\ttab inside')",
    "print('\\u00e9', 'é', '\\x41', '\\\\', '\\'', \"\\\"\")",
    "print(b'\\x00\\xff', '\\0', '\\a\\b\\f\\v\\r')",
    "if True:\n\tprint('a tab indents this line')",
    "total = (1 +\n         2)\nprint('a' \\\n      'b', total)",
    "print(1)\n\n\nprint(2)",
    "print('}\"}]')",
    "s = '''it's \"\"\" inside'''\nprint(s)",
    "\n".join(f"v{i} = {i} * 2  # step {i}" for i in range(30)) + "\nprint(v29)",
]


def test_the_programs_are_python() -> None:
    for program in PROGRAMS:
        compile(program, "<program>", "exec")


class GbnfMatcher:
    """The rules of a GBNF grammar, each compiled on demand to a Python regex (no recursion)."""

    _TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(\[(?:[^\]\\]|\\.)*\])|([A-Za-z][A-Za-z0-9_-]*)'
                        r"|(\{\d*(?:,\d*)?\})|([()|*+?]))")

    def __init__(self, grammar: str) -> None:
        self.rules = {}
        for line in grammar.splitlines():
            if "::=" in line:
                name, body = line.split("::=", 1)
                self.rules[name.strip()] = body.strip()
        self._compiled: dict[str, str] = {}

    def regex(self, rule: str, seen: tuple[str, ...] = ()) -> str:
        assert rule not in seen, f"recursive rule {rule} (this matcher compiles flat rules only)"
        if rule not in self._compiled:
            self._compiled[rule] = self._body(self.rules[rule], (*seen, rule))
        return self._compiled[rule]

    def matches(self, rule: str, text: str) -> bool:
        return re.fullmatch(self.regex(rule), text, re.DOTALL) is not None

    def _body(self, body: str, seen: tuple[str, ...]) -> str:
        out: list[str] = []
        pos = 0
        while pos < len(body.rstrip()):
            m = self._TOKEN.match(body, pos)
            assert m, f"cannot read {body[pos:]!r}"
            pos = m.end()
            literal, klass, name, braces, op = m.groups()
            if literal is not None:
                out.append(re.escape(_unescape(literal[1:-1])))
            elif klass is not None:
                out.append(_char_class(klass))
            elif name is not None:
                out.append(f"(?:{self.regex(name, seen)})")
            elif braces is not None:
                out.append(braces)
            elif op == "(":
                out.append("(?:")
            else:
                out.append(op)
        return "".join(out)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            nxt = text[i + 1]
            if nxt == "x":
                out.append(chr(int(text[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _char_class(klass: str) -> str:
    inner = klass[1:-1]
    negate = inner.startswith("^")
    inner = inner[1:] if negate else inner
    parts, i = [], 0
    while i < len(inner):  # each character of the class, unescaped, then escaped for Python
        if inner[i] == "\\" and inner[i + 1] == "x":
            ch, i = chr(int(inner[i + 2:i + 4], 16)), i + 4
        elif inner[i] == "\\":
            ch, i = _ESCAPES[inner[i + 1]], i + 2
        else:
            ch, i = inner[i], i + 1
        parts.append("-" if ch == "-" and parts and i < len(inner) else re.escape(ch))
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def test_the_matcher_reads_gbnf_as_llama_cpp_does() -> None:
    g = GbnfMatcher('root ::= "a\\"" [^"\\\\\\x00-\\x1F] ("x" | "y"){1,2} [0-9]?')
    assert g.matches("root", 'a"zxy') and g.matches("root", 'a"!x7')
    assert not g.matches("root", 'a"\\x') and not g.matches("root", 'a"\nx') and not g.matches("root", 'a"zxyx')


@pytest.mark.parametrize("start", [None, "v = ", "df[.["])
def test_the_code_rule_admits_every_program(start: str | None) -> None:
    grammar = GbnfMatcher(tools_grammar(TOOLS, start=start))
    prefix = {"v = ": "v = ", "df[.[": "df."}.get(start or "", "")
    for program in PROGRAMS:
        for encoded in (json.dumps(prefix + program), json.dumps(prefix + program, ensure_ascii=False)):
            assert grammar.matches("code", encoded), program
            call = '{"name": "python", "arguments": {"code": ' + encoded + "}}"
            assert grammar.matches("root", call), program


async def test_every_program_reaches_the_call_unchanged(fake, monkeypatch, tmp_path):  # noqa: F811
    """Through llama-server's wire (the fake serves the reply in pieces), the provider's
    grammar-constrained parse path and the streamed-JSON decoding: the tool call's code is the
    program, and the grammar the request carried admits the reply."""
    # the fake's .gguf is treated as a packaged model: its requests get the grammar
    monkeypatch.setattr(provider, "PACKAGED_MODELS", {**provider.PACKAGED_MODELS, fake.model_id: None})
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_TOOLCALLS", "grammar")
    monkeypatch.setenv("PI_NOTEBOOK_LOCAL_CODE", "json")  # this test is of the JSON call's grammar
    chunks_file = tmp_path / "chunks.json"
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS_FILE", str(chunks_file))
    tool = Tool(name="python", description="Run Python code in the notebook.", parameters=PYTHON)
    for program in PROGRAMS:
        reply = '{"name": "python", "arguments": {"code": ' + json.dumps(program) + "}}"
        chunks_file.write_text(json.dumps([reply[i:i + 7] for i in range(0, len(reply), 7)]))
        message = await complete(fake.model, Context(messages=[UserMessage(content="run the step")],
                                                     tools=[tool]))
        calls = [c for c in message.content if c.type == "toolCall"]
        assert [c.arguments for c in calls] == [{"code": program}], (program, message)
        grammar = fake.requests()[-1]["body"]["grammar"]
        assert GbnfMatcher(grammar).matches("root", reply), program


# the model writes Python into JSON without escaping its backslashes: '\n' inside a one-line
# literal arrives as a line break (its JSON "\n"), which no one-line literal can hold
UNESCAPED = [
    ("print('\n'.join(['alpha', 'beta']))", "print('\\n'.join(['alpha', 'beta']))"),
    ('rows = ["a", "b"]\nprint("rows:\n" + "\n".join(rows))', 'rows = ["a", "b"]\nprint("rows:\\n" + "\\n".join(rows))'),
    ("import re\nprint(re.split(r'\n', 'a\\nb'))", "import re\nprint(re.split(r'\\n', 'a\\nb'))"),
    ("# it's a comment\ns = '''two\nlines'''\nprint(s + '\n')", "# it's a comment\ns = '''two\nlines'''\nprint(s + '\\n')"),
]


def test_a_line_break_inside_a_one_line_literal_is_the_escape_the_model_meant() -> None:
    from pi_notebook.local.tool_calls import escapes_in_literals

    for written, meant in UNESCAPED:
        assert escapes_in_literals(written) == meant
        compile(meant, "<meant>", "exec")
    for program in PROGRAMS:  # code that compiles is never touched
        assert escapes_in_literals(program) is None
    assert escapes_in_literals("print('never closed)\n") is None  # no fix: as written


async def test_unescaped_code_reaches_the_call_as_meant(fake, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr(provider, "PACKAGED_MODELS", {**provider.PACKAGED_MODELS, fake.model_id: None})
    chunks_file = tmp_path / "chunks.json"
    monkeypatch.setenv("FAKE_LLAMA_CHUNKS_FILE", str(chunks_file))
    tool = Tool(name="python", description="Run Python code in the notebook.", parameters=PYTHON)
    written, meant = UNESCAPED[0]
    # (the reply the 1.5B wrote for "one print of '\n'.join(...)": {"code": "print('\n'.join(...))"})
    reply = '{"name": "python", "arguments": {"code": ' + json.dumps(written) + "}}"
    chunks_file.write_text(json.dumps([reply]))
    message = await complete(fake.model, Context(messages=[UserMessage(content="two lines")], tools=[tool]))
    assert [c.arguments for c in message.content if c.type == "toolCall"] == [{"code": meant}]

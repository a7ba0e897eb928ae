"""Tool calls of the small embedded models: constrained, parsed here, recovered or reported.

Why not llama-server's own tool-call parsing (docs/design/local-model.md): with the
project's chat template the calls are bare JSON (``{"name": ..., "arguments": ...}``)
with no start marker, so with ``tool_choice: "auto"`` llama-server has no trigger for its
lazy grammar and samples freely; the 0.5B model then invents tool names
(``plot_bar_chart_of_totals``) and the server ends the stream with its internal "does not
match the expected peg-native format" error. ``"required"`` constrains the call but forbids
the final text answer.

So each request is reshaped (``shape_request``, an ``on_payload`` hook):

* ``tool_choice: "none"``: the tools are still rendered into the prompt by the template,
  the server does not parse calls, and it accepts a custom ``grammar``;
* a GBNF ``grammar`` built from the offered tools: the output is either prose (not starting
  with ``{``) or exactly one call ``{"name": "<an offered tool>", "arguments": <its schema>}``;
* a turn budget: on the first turn after the user's message a call is required (the answer
  must come from the notebook, not from the model's memory), and again after a tool error
  (fix and retry); after ``max_tool_calls`` results only prose is allowed, so the run always
  ends with an answer;
* grounded numbers: the prose may state only numbers that the prompt or a tool result of
  the conversation contains (and their roundings): the 0.5B model otherwise answers "the
  total revenue is 100" next to a tool output that says 1445.2.

The run checks (local/checks.py) use ``stated_values`` / ``ungrounded_values`` (the names,
labels, dates and numbers an answer states, and those no result shows), and may end a run with
a corrective user message whose ``FORCED_REPLY_MARK`` sentence becomes the reply word for word.

``TextToolCallStream`` turns the streamed text back into pi's events: prose streams as
text, a JSON call streams as a tool call. Without the grammar (``PI_NOTEBOOK_LOCAL_TOOLCALLS=
parse``) the same parser recovers an unknown tool name whose arguments fit exactly one
offered tool (a ``code`` argument -> ``python``), visibly (a note), and keeps an unknown
name that fits none, so the agent loop answers it with a tool error the model can react to.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import tokenize
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ..ai._fast import append_delta, delta_event
from ..ai._json import parse_streaming_json
from ..tools.context.namespace import read_listed_variables
from .fenced import TOOL as FENCED_TOOL
from .fenced import as_fenced_messages, call_code, code_of_block, fenced_applies, fenced_rules, open_block_code
from .intent import implicit_subject, requested_subject, requested_target
from ..ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

__all__ = [
    "NOTE_PREFIX", "TOOLCALL_MODES", "TOOLCALL_FAILURE_HINT", "tool_call_mode", "tools_grammar",
    "shape_request", "TextToolCallStream", "friendly_error", "recover_tool_name", "stated_values",
    "ungrounded_values", "CHECK_PREFIX", "FORCED_REPLY_MARK", "FORMAT_CHECK_MARK", "VALUES_CHECK_MARK", "repair_call_tail", "escapes_in_literals",
]

TOOLCALL_MODES = ("grammar", "parse", "server")
DEFAULT_MAX_TOOL_CALLS = 3
PROMPT_TOOL_CALLS_FACTOR = 2
RETRY_TEMPERATURE = 0.7
FINAL_ANSWER_TOKENS = 200

# Notes the provider adds to the transcript for the user; stripped again from what the model reads.
NOTE_PREFIX = "[embedded model] "
TOOLCALL_FAILURE_HINT = (
    "the small embedded model could not form a tool call; try a more explicit request, "
    "or a cloud model (-m provider/model, e.g. -m openai/gpt-4.1 with OPENAI_API_KEY set)"
)
_PEG_MESSAGE = "does not match the expected peg-native format"


def tool_call_mode() -> str:
    """``grammar`` (default), ``parse`` (no grammar, parse and recover here) or ``server``
    (llama-server's own parser, as for GGUF files with their own template)."""
    mode = os.environ.get("PI_NOTEBOOK_LOCAL_TOOLCALLS", "grammar").strip().lower()
    return mode if mode in TOOLCALL_MODES else "grammar"


# --- the grammar -----------------------------------------------------------------------------

_BASE_RULES = r'''
ws ::= [ ]?
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
boolean ::= "true" | "false"
value ::= object | array | string | number | boolean | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
'''.strip()
# The code argument is any JSON string: every escape JSON has, so decoding it gives back exactly
# the code the model wrote ('\\n'.join, sep='\\t', regexes, Windows paths, '#' comments). No
# line or character cap: the reply's max_tokens bounds it. (A narrower rule, without backslash
# escapes or '#' and 8 lines, turned the model's "\\n" inside a string literal into a line
# break and cut multi-step code at line 8: SyntaxErrors the model did not write.)
_CODE_RULE = r'code ::= "\"" char* "\""'
# the request named its result ("into totals"): the code starts by assigning it. (Measured on
# the 0.5B: allowed import lines first, it filled them with imports it then misused; made to
# end with a line showing the name, it could not close the string and wrote prose into it.)
_START_RULE = r'code ::= "\"" {start} char* "\""'
_CODE_IN_REQUEST = re.compile(r"[=;(]|\n")
_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*( = )?")
READ_ONLY_START = "[.["  # a start ``name[.[`` : the code begins with ``name.`` or ``name[``

_SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


def _literal(text: str) -> str:
    """A GBNF string literal matching ``text`` exactly (as JSON would print it)."""
    return json.dumps(json.dumps(text, ensure_ascii=False), ensure_ascii=False)


def _value_rule(schema: Any, key: str = "") -> str:
    if not isinstance(schema, Mapping):
        return "value"
    if key == "code" and schema.get("type") == "string":
        return "code"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, (str, int, float, bool)) for e in enum):
        return "(" + " | ".join(json.dumps(json.dumps(e)) for e in enum) + ")"
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        item = _value_rule(schema.get("items"))
        return f'("[" ws ( {item} ( ws "," ws {item} )* )? ws "]")'
    return "value"  # nested objects, unions: any JSON value; the agent validates the schema


def _arguments_rule(parameters: Any) -> str:
    """An object with the schema's properties: the required ones in order, then the optional."""
    if not isinstance(parameters, Mapping) or not isinstance(parameters.get("properties"), Mapping):
        return "object"
    props: Mapping[str, Any] = parameters["properties"]
    if not props:
        return '("{" ws "}")'
    required = [k for k in parameters.get("required") or [] if k in props]
    optional = [k for k in props if k not in required]
    parts: list[str] = []
    for i, key in enumerate(required):
        sep = "" if i == 0 else '"," ws '
        parts.append(f'{sep}{_literal(key)} ws ":" ws {_value_rule(props[key], key)}')
    body = " ws ".join(parts)
    for key in optional:
        pair = f'{_literal(key)} ws ":" ws {_value_rule(props[key], key)}'
        body = f'{body} ( ws "," ws {pair} )?' if body else f"( {pair} )?"
    return f'("{{" ws {body} ws "}}")'


def _number_literals(numbers: Iterable[str]) -> list[str]:
    return sorted({json.dumps(n) for n in numbers if _NUMBER_RE.fullmatch(n)}, key=lambda x: (len(x), x))


def _start_literal(start: str | None) -> str | None:
    """The GBNF sequence a code argument starts with, or None for no start."""
    if start is None:
        return None
    read = start.endswith(READ_ONLY_START)
    name = start.removesuffix(READ_ONLY_START)
    if not _START.fullmatch(name) or (read and not name.isidentifier()):
        return None
    # (an identifier and " = " need no escaping, in JSON or in GBNF; a read-only start goes on
    # with an attribute or an index, so the user's data is read, not replaced)
    return f'"{name}" ("." | "[")' if read else f'"{name}"'


def _code_rule(start: str | None) -> str:
    literal = _start_literal(start)
    return _CODE_RULE if literal is None else _START_RULE.format(start=literal)


def tools_grammar(tools: list[Mapping[str, Any]], *, allow_call: bool = True, allow_text: bool = True,
                  numbers: Iterable[str] | None = None, start: str | None = None, fenced: bool = False,
                  retry_line: str | None = None, tags: Sequence[str] = ()) -> str:
    """GBNF for one reply: prose, or one call of an offered tool (OpenAI-format ``tools``).

    With ``numbers``, the prose may state only those numbers (digits elsewhere are refused):
    the answer can quote what the tool output and the prompt showed, not make numbers up.
    With ``start`` (``"name = "`` or ``"name"``), a ``code`` argument starts with it
    (intent.py). ``fenced``: the call is a fenced Python block instead of JSON (fenced.py),
    and prose does not open with a backtick either; with ``retry_line`` the block's code starts
    with that line (see ``retry_start``). With ``tags`` (keys of the ``@key[value]`` form the
    question asked for), prose ends with those tags, in order."""
    alternatives: list[str] = []
    rules: list[str] = []
    opener = "{`" if fenced else "{"
    if allow_call and fenced:
        literal = json.dumps(retry_line, ensure_ascii=False) if retry_line else _start_literal(start)
        block, block_rules = fenced_rules(literal)
        alternatives.append(block)
        rules += block_rules
    elif allow_call:
        for i, spec in enumerate(tools):
            inner = spec.get("function")
            function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else spec
            name = function.get("name")
            if not isinstance(name, str) or not name:
                continue
            rules.append(f'call{i} ::= "{{" ws "\\"name\\"" ws ":" ws {_literal(name)} ws "," ws '
                         f'"\\"arguments\\"" ws ":" ws {_arguments_rule(function.get("parameters"))} ws "}}"')
            alternatives.append(f"call{i}")
    if allow_text or not alternatives:
        # prose: anything that does not open with "{" (a call) or blank space
        if numbers is None:
            rules.append(rf'prose ::= [^{opener} \t\n\x00] [^\x00]*')
        else:
            literals = _number_literals(numbers)
            if literals:
                # (Measured and dropped: forbidding "," / "." between two allowed numbers, against
                # "$1,24,0.00": the quickstart's answer then looped on "... is 262.2." until cut.)
                rules.append(rf'prose ::= [^{opener} \t\n\x000-9] ( [^\x000-9] | num [^\x000-9] )* num?')
                rules.append("num ::= " + " | ".join(literals))
            else:
                rules.append(rf'prose ::= [^{opener} \t\n\x000-9] [^\x000-9]*')
        if tags:
            # (a tag's value is any short text: whether an output shows it is the run checks'
            # question, local/checks.py, not the grammar's)
            form = ' " " '.join(f'"@{key}[" tagvalue "]"' for key in tags)
            rules.append(f"text ::= ( prose [ \\n]* )? {form}")
            rules.append(r"tagvalue ::= [^\]\n\x00]+")
        else:
            rules.append("text ::= prose")
        alternatives.append("text")
    return "\n".join([f"root ::= {' | '.join(alternatives)}", *rules, _code_rule(start), _BASE_RULES]) + "\n"


# --- the request ----------------------------------------------------------------------------

def retry_start(messages: list[Mapping[str, Any]]) -> str | None:
    """How the call after a failed one starts (OpenAI-format messages): the failed code up to
    the line that raised, then that error as a comment; or None.

    Made to write a block after an error, the 1.5B wrote the error itself into it (the
    traceback's first lines, then "IndentationError", then that error: six calls, no code);
    started on the failed code's first line, it copied the failed code whole, and the copy was
    refused as a repeat. Resumed at the line that raised, that line and the error (with its
    hint, tools/output/error_hints.py) as comments, the block goes on with the line written
    anew: the way a code model continues code."""
    code, error = _last_failure(messages)
    if code is None:
        return None
    lines = code.splitlines()
    at = _failed_line(error, len(lines))
    failed = lines[at - 1] if at else ""
    indent = failed[:len(failed) - len(failed.lstrip())]  # the comments stand where it did
    if at:
        # the lines that ran, then the one that raised as a comment: the model writes it anew
        # (kept as code, the retry began with the same failing line and went on with prose)
        kept = [line.rstrip() for line in lines[:at - 1]]
        if failed.strip() and len(failed) <= 200:
            kept.append(f"{indent}# failed: {failed.strip()}")
    else:
        first = next((x.rstrip() for x in lines if x.strip()), "")
        kept = [] if _not_code(first) else [first]
    # (a kept line the fence could close, or an over-long one, makes no start)
    if any(line.lstrip().startswith("`") for line in kept) or sum(map(len, kept)) > MAX_RETRY_PREFIX:
        kept = kept[:1] if kept and not kept[0].lstrip().startswith("`") and len(kept[0]) <= 200 else []
    why = _error_comment(error)
    if why:
        kept.append(f"{indent}# {why}")
    return "\n".join(kept) or None


MAX_RETRY_PREFIX = 4000  # characters of failed code a retry resumes (longer: its first line only)
_FAILED_AT = re.compile(r"<agent-code-\d+>(?::|, line )(\d+)")


def _last_failure(messages: list[Mapping[str, Any]]) -> tuple[str | None, str]:
    """(the code, its error text) of the latest call since the user's message whose code ran
    and failed (a call the checks refused did not run: the one before it is the failure)."""
    results = {m.get("tool_call_id"): "\n".join(_texts(m.get("content"))) for m in messages
               if m.get("role") == "tool"}
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        for call in reversed(message.get("tool_calls") or []) if message.get("role") == "assistant" else ():
            error = results.get(call.get("id") if isinstance(call, Mapping) else None, "")
            if not error or error.startswith("Not run"):
                continue
            code = call_code(call)
            return (code, error) if code is not None else (None, "")
    return None, ""


def _failed_line(error: str, count: int) -> int | None:
    """The line of the agent's code the error points at (the innermost mention), if any."""
    found = _FAILED_AT.findall(error)
    if not found:
        return None
    line = int(found[-1])
    return line if 1 <= line <= count else None


def _error_comment(error: str) -> str:
    """The error's first line (with its hint) for a comment: one line, at most 300 characters."""
    lines = [x.strip() for x in error.splitlines() if x.strip()]
    # (the error's own line: a figure or print before it comes first in the result)
    first = next((x for x in lines if x.startswith("[error]")), lines[0] if lines else "")
    first = first.removeprefix("[error]").strip()
    if not first or first.startswith("[stdout]"):
        return ""
    first = first.replace("\r", " ")
    return first if len(first) <= 300 else first[:299] + "…"


def _not_code(line: str) -> bool:
    """A first line that does not read as Python by itself (e.g. a traceback's header written
    as code): not a statement start, a comment or a decorator."""
    stripped = line.strip()
    if stripped.startswith(("#", "@")):
        return False
    try:
        ast.parse(stripped)
        return False
    except SyntaxError:
        # an opening line of a block ("for x in y:", "def f():", "df = pd.DataFrame({")
        return not re.search(r"[:({\[,\\]\s*$", stripped)


def _tool_calls_since_user(messages: list[Mapping[str, Any]]) -> int | None:
    """Tool results after the last user message; None when the last message is the user's."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            return count if count else None
        if role == "tool":
            count += 1
    return count


def _tool_calls_since_prompt(messages: list[Mapping[str, Any]]) -> int:
    """Tool results after the user's own last message (the run checks' corrections, user
    messages too, do not count as a new prompt)."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user" and not "\n".join(_texts(message.get("content"))).startswith(CHECK_PREFIX):
            break
        count += role == "tool"
    return count


_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
MAX_GROUNDED_NUMBERS = 400


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def grounded_numbers(messages: list[Mapping[str, Any]]) -> list[str]:
    """The numbers the user and the tools wrote in this conversation, newest first, with the
    roundings an answer may use (1445.234 -> 1445.23, 1445.2, 1445). A tool result's error
    part does not count: when every call failed, the answer can state no number it computed."""
    seen: dict[str, None] = {}
    for message in reversed(messages):
        if message.get("role") not in ("user", "tool"):
            continue
        for text in _texts(message.get("content")):
            if message.get("role") == "tool":
                # an error's message and traceback (line numbers, library code) are not results
                text = text.split("[error]", 1)[0]
            for match in _NUMBER_RE.findall(text):
                seen.setdefault(match, None)
                if "." in match:
                    whole, frac = match.split(".")
                    for digits in range(min(len(frac), 3) - 1, -1, -1):
                        value = round(float(match), digits)
                        seen.setdefault(f"{value:.{digits}f}", None)
                    seen.setdefault(whole, None)
        if len(seen) >= MAX_GROUNDED_NUMBERS:
            break
    return list(seen)[:MAX_GROUNDED_NUMBERS]


# --- values an answer states ----------------------------------------------------------------

# Capitalised words that are prose, not values, inside a sentence
_GENERIC_WORDS = frozenset({
    "i", "dataframe", "dataframes", "series", "python", "pandas", "numpy", "matplotlib", "jupyter",
    "notebook", "nan", "none", "true", "false", "csv", "json", "ok", "id", "sql", "api", "excel",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
})
# A sentence's first word is capitalised anyway, so it is a stated value only when it is no
# ordinary way to begin a sentence ("John spent the most." after failed code: measured on the
# 0.5B). These are English words that open sentences of an answer in general (function words,
# pronouns, discourse words, the verbs and nouns of describing a result), written from English,
# not from the task sets' answers; a word that ends like an adverb, a participle or a gerund
# (-ly, -ed, -ing) is prose too. A missing word here costs a corrective turn, never a result.
_PROSE_STARTER_WORDS = """
a about above according actually additionally after afterwards again all also although always
among an and another any anyway apologies apparently are as at average based because before
below besides between both but by can cannot column columns consequently could count data
dataset despite did do does done each either error even every everything except finally first
for from further furthermore given great had has have having he hello her here hers hey hi his
how however i if in indeed instead is it its just last lastly let lets looking looks many may
maybe meanwhile moreover most much my n na namely neither nevertheless next no none nor not
note now of ok okay on once one only or other otherwise our overall per perhaps please plus
result results row rows run second see she should similarly since so some sorry still such
sum summary sure than thank thanks that the their them then there therefore these they third
this those though thus to together too total two unfortunately unless unlike until upon us use
using value values was we well were what whatever when where whereas whether which while who
whose why will with within without would yes yet you your
"""
_PROSE_STARTERS = frozenset(_PROSE_STARTER_WORDS.split())
_PROSE_ENDINGS = ("ly", "ed", "ing")
# a month is a value ("the best month is April"): grounded by its name or by a date in it
_MONTHS = {name: i + 1 for i, names in enumerate([
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
    ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
    ("october", "oct"), ("november", "nov"), ("december", "dec")]) for name in names}
_QUOTED = re.compile(r"`([^`\n]{1,60})`|'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"|\*\*([^*\n]{1,60})\*\*")
_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_SENTENCE_BREAK = re.compile(r"[.!?:;]\s+|\n+|^\s*(?:[-*]|\d+\.)\s+", re.MULTILINE)
_ANSWER_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# a maximal run of digits, "," and ".": 1,445.2 is 1445.2, but "1,24,4,4" (digits the model
# glued from allowed numbers) is one value that no result shows
_ANSWER_NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _names_a_value(first: str) -> bool:
    """A sentence's capitalised first word that is no ordinary sentence opening (a name)."""
    lowered = first.lower()
    return (first[0].isupper() and len(first) > 1 and lowered not in _PROSE_STARTERS
            and lowered not in _GENERIC_WORDS
            and not (len(first) > 4 and lowered.endswith(_PROSE_ENDINGS)))


def stated_values(answer: str, labels: Iterable[str] = ()) -> list[str]:
    """What ``answer`` states as values besides prose: quoted or code-spelled names, dates,
    numbers, capitalised words inside a sentence ("the top products are Apple and Banana") or
    opening one when they are no ordinary opening ("John spent the most"), and any of
    ``labels`` (the data's own column names and categories, lowercase ones included)."""
    values: dict[str, None] = {}
    for groups in _QUOTED.findall(answer):
        for value in groups:
            if value.strip():
                values.setdefault(value.strip(), None)
    for date in _DATE.findall(answer):
        values.setdefault(date, None)
    undated = _DATE.sub(" ", answer)
    for number in _ANSWER_NUMBER.findall(undated.replace(", ", "; ")):  # "11, 10 and 5": a list
        number = number.rstrip(",")
        if "," not in number or _THOUSANDS.fullmatch(number):
            number = number.replace(",", "")
        values.setdefault(number, None)
    for sentence in _SENTENCE_BREAK.split(undated):
        words = _ANSWER_WORD.findall(sentence)
        if words and _names_a_value(words[0]):
            values.setdefault(words[0], None)
        for word in words[1:]:
            if word[0].isupper() and word.lower() not in _GENERIC_WORDS:
                values.setdefault(word, None)
    wanted = {label.lower() for label in labels if len(label) > 1}
    if wanted:
        for word in _ANSWER_WORD.findall(undated):
            if word.lower() in wanted:
                values.setdefault(word, None)
    # in the answer's order, for the message that names them
    return sorted(values, key=lambda v: (answer.find(v) % (len(answer) + 1)))


def ungrounded_values(answer: str, sources: Iterable[str], labels: Iterable[str] = ()) -> list[str]:
    """The values ``answer`` states (``stated_values``) that appear in none of ``sources`` (the
    run's tool outputs, the user's words, the notebook's names). Case does not matter for
    words; a number is grounded by any of its roundings (``grounded_numbers``)."""
    text = "\n".join(sources)
    lowered = text.lower()
    numbers = set(grounded_numbers([{"role": "user", "content": text}]))
    months = {int(m) for m in re.findall(r"\b\d{4}-(\d{2})\b", text)}
    # a date's day as an answer writes it: 2024-01-03 grounds "January 3"
    numbers |= {str(int(d)) for d in re.findall(r"\b\d{4}-\d{2}-(\d{2})\b", text)}
    missing = []
    for value in stated_values(answer, labels):
        month = _MONTHS.get(value.lower())
        if month is not None and value[0].isupper():
            if month not in months and value.lower() not in lowered:
                missing.append(value)
        elif _NUMBER_RE.fullmatch(value):
            if value not in numbers and ("." not in value or value.rstrip("0").rstrip(".") not in numbers):
                missing.append(value)
        elif value.lower() not in lowered:
            missing.append(value)
    return missing


def _request_parts(messages: list[Mapping[str, Any]]) -> tuple[str, str]:
    """(the user's own words, the notebook context) of the last user message: its last text
    part, and the parts before it (the context travels as a part before it; magics/context.py)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = list(_texts(message.get("content")))
            return (texts[-1], "\n".join(texts[:-1])) if texts else ("", "")
    return "", ""


def _strip_notes(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str) and NOTE_PREFIX in content:
            kept = [line for line in content.split("\n\n") if not line.startswith(NOTE_PREFIX)]
            message["content"] = "\n\n".join(kept)
        elif isinstance(content, list):
            message["content"] = [p for p in content if not (
                isinstance(p, Mapping) and str(p.get("text", "")).startswith(NOTE_PREFIX))]


# A corrective user message of the run checks (local/checks.py) that ends with
# FORCED_REPLY_MARK + a sentence makes the next reply exactly that sentence.
CHECK_PREFIX = "Check: "
FORCED_REPLY_MARK = "Reply exactly: "


# ... and one that says the question asked for the answer as ``@key[value]`` makes the next
# prose end with those tags (the keys read from the check: "... as @top_month[value] ...").
FORMAT_CHECK_MARK = "the question asks for the answer as"
# a check of what an answer states ("no output shows \"July\" ...") may be answered in prose
VALUES_CHECK_MARK = "no output shows"
_FORMAT_KEY = re.compile(r"@(\w+)\[value\]")


def _last_check(messages: list[Mapping[str, Any]]) -> str:
    """The text of the last message when it is a run check (local/checks.py), else ''."""
    if not messages or messages[-1].get("role") != "user":
        return ""
    text = "\n".join(_texts(messages[-1].get("content")))
    return text if text.startswith(CHECK_PREFIX) else ""


def _answer_check(messages: list[Mapping[str, Any]]) -> bool:
    """The last message is a run check of the answer's values or form (not of an outcome the
    request asked for, which needs a call to make)."""
    text = _last_check(messages)
    return FORMAT_CHECK_MARK in text or VALUES_CHECK_MARK in text


def _format_keys(messages: list[Mapping[str, Any]]) -> list[str]:
    text = _last_check(messages)
    if FORMAT_CHECK_MARK not in text:
        return []
    asked = text.split(FORMAT_CHECK_MARK, 1)[1].split(".", 1)[0]
    return list(dict.fromkeys(_FORMAT_KEY.findall(asked)))[:8]


def _forced_reply(messages: list[Mapping[str, Any]]) -> str | None:
    text = _last_check(messages)
    if FORCED_REPLY_MARK not in text:
        return None
    sentence = text.rsplit(FORCED_REPLY_MARK, 1)[1].strip()
    return sentence or None


def shape_request(params: dict[str, Any], *, mode: str, max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
                  require_first_call: bool = True, last_result_failed: bool = False,
                  ground_numbers: bool = True) -> dict[str, Any]:
    """The llama-server request body for ``mode`` (see the module docstring)."""
    messages = params.get("messages") or []
    _strip_notes(messages)
    tools = params.get("tools") or []
    if mode == "server" or not tools:
        return params
    params["tool_choice"] = "none"  # the template still shows the tools; we parse the calls
    params.pop("parallel_tool_calls", None)
    fenced = fenced_applies(tools)
    # (read before the earlier calls are rewritten as blocks)
    retry_line = retry_start(messages) if fenced and last_result_failed else None
    if fenced:
        # the form's own instructions stand for the schema; earlier calls read as blocks (fenced.py)
        as_fenced_messages(messages)
        params.pop("tools", None)
        params.pop("tool_choice", None)
    if mode != "grammar":
        return params
    forced = _forced_reply(messages)
    if forced is not None:
        # the run checks' last word on an answer no result supports (local/checks.py): the
        # reply is exactly this sentence, so the run ends saying what is known and what failed
        params["grammar"] = f"root ::= {json.dumps(forced, ensure_ascii=False)}\n"
        params["max_tokens"] = FINAL_ANSWER_TOKENS
        return params
    done = _tool_calls_since_user(messages)
    first_turn = done is None
    # (each correction of the run checks allows max_tool_calls more; the prompt as a whole at
    # most twice that: measured, a load request made 9 calls in 176 s before it ended)
    allow_call = ((done is None or done < max_tool_calls)
                  and _tool_calls_since_prompt(messages) < PROMPT_TOOL_CALLS_FACTOR * max_tool_calls)
    # a call first (the answer must come from the notebook), and another one after an error;
    # not after a check of the answer's values or form: the outputs above may hold what it
    # asks for (measured on the 1.5B with the fenced form: made to write a block there, it
    # wrote its answer into it, and the SyntaxError cost a call)
    tags = _format_keys(messages)
    allow_text = (not allow_call or _answer_check(messages)
                  or not ((first_turn and require_first_call) or last_result_failed))
    if last_result_failed and allow_call:
        # greedy decoding repeats the failing code word for word: sample the retry instead
        params["temperature"] = RETRY_TEMPERATURE
    if not allow_call:
        # the answer after the last allowed call: a few sentences. (Measured on the 0.5B: 2,048
        # tokens, 3 minutes, after three failed calls. A cap on every reply was dropped: the
        # quickstart's answer, 560 tokens, was then cut and lost its end.)
        params["max_tokens"] = min(int(params.get("max_tokens") or FINAL_ANSWER_TOKENS), FINAL_ANSWER_TOKENS)
    numbers = grounded_numbers(messages) if ground_numbers else None
    # the first call of a prompt that names its result assigns it, else starts from the
    # notebook variable the request names (intent.py)
    start = None
    if first_turn:
        request, context = _request_parts(messages)
        # the user wrote the code: no start at all (measured on the 1.5B: with the notebook's
        # only DataFrame as a forced start, the quickstart's `monthly = df.groupby(...)` lost
        # its `monthly = ` and failed with a NameError)
        if not _CODE_IN_REQUEST.search(request):
            listed = read_listed_variables(context)
            target = requested_target(request, listed.names, listed.columns)
            subject = requested_subject(request, listed) if target is None else None
            implicit = implicit_subject(request, listed) if target is None and subject is None else None
            start = f"{target} = " if target else subject or (implicit + READ_ONLY_START if implicit else None)
    params["grammar"] = tools_grammar(tools, allow_call=allow_call, allow_text=allow_text, numbers=numbers,
                                      start=start, fenced=fenced, retry_line=retry_line, tags=tags)
    return params


# --- the reply ------------------------------------------------------------------------------

def _tool_specs(tools: list[Any] | None) -> dict[str, Mapping[str, Any]]:
    specs: dict[str, Mapping[str, Any]] = {}
    for tool in tools or []:
        name = getattr(tool, "name", None)
        params = getattr(tool, "parameters", None)
        to_schema = getattr(params, "model_json_schema", None)  # a pydantic model class
        if callable(to_schema):
            params = to_schema()
        if isinstance(name, str):
            specs[name] = params if isinstance(params, Mapping) else {}
    return specs


def recover_tool_name(name: str, arguments: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any]]
                      ) -> str | None:
    """The one offered tool whose parameters ``arguments`` fit exactly (keys known, required
    present), or None when none or several fit."""
    keys = set(arguments)
    fits = []
    for tool_name, schema in tools.items():
        props = set((schema.get("properties") or {}).keys())
        required = set(schema.get("required") or [])
        if keys and keys <= props and required <= keys:
            fits.append(tool_name)
    return fits[0] if len(fits) == 1 else None


_NAME_RE = re.compile(r'"name"\s*:\s*"([^"]*)"')


def friendly_error(message: str | None) -> str | None:
    """llama-server's internal parser message -> what happened and what to try."""
    if message and _PEG_MESSAGE in message:
        return f"The model named a tool that does not exist: {TOOLCALL_FAILURE_HINT}."
    return message


# the end of the JSON call written inside the code string: a quote, then the closing braces
# (measured on the 0.5B: `print(x.sum())\"})}uff. `; it writes the escaped quote the grammar
# allows inside code where it meant the closing one, and the code then does not parse)
_CALL_TAIL = re.compile(r'"+[\s)\]]*\}')


_BRACE_TAIL = re.compile(r"\}+\s*$")
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _open_brackets(code: str) -> list[str] | None:
    """The brackets ``code`` leaves open, innermost last (strings and comments skipped, by the
    tokenizer), or None when a closing bracket does not match."""
    stack: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type != tokenize.OP:
                continue
            if token.string in _CLOSING:
                stack.append(token.string)
            elif token.string in (")", "]", "}") and (not stack or _CLOSING[stack.pop()] != token.string):
                return None
    except (tokenize.TokenError, SyntaxError):
        pass  # "EOF in multi-line statement": what was read so far is what counts
    return stack


def escapes_in_literals(code: str) -> str | None:
    """``code`` with each line break inside a one-line string literal written as the ``\\n``
    escape, when that makes code that does not compile compile; else None.

    A small model writes Python into the JSON call without escaping its backslashes: for
    ``print('\\n'.join(x))`` it writes ``"print('\\n'.join(x))"``, whose JSON ``\\n`` decodes to
    a line break. No line break can stand inside a one-line literal, so there it can only be
    the escape the model meant (the value at run time is the same line break)."""
    try:
        compile(code, "<call>", "exec")
        return None
    except SyntaxError:
        pass
    except (ValueError, OverflowError, MemoryError, RecursionError):
        return None
    out: list[str] = []
    i, n = 0, len(code)
    changed = False
    while i < n:
        ch = code[i]
        if ch == "#":
            end = code.find("\n", i)
            end = n if end < 0 else end
            out.append(code[i:end])
            i = end
            continue
        if ch not in "'\"":
            out.append(ch)
            i += 1
            continue
        # (a raw literal too: there the two characters are what the model meant as well)
        quote = code[i:i + 3] if code[i:i + 3] in ("'''", '"""') else ch
        out.append(quote)
        i += len(quote)
        while i < n and not code.startswith(quote, i):
            if code[i] == "\\" and i + 1 < n:
                out.append(code[i:i + 2])
                i += 2
            elif code[i] in "\r\n" and len(quote) == 1:
                out.append("\\n" if code[i] == "\n" else "\\r")
                changed = True
                i += 1
            else:
                out.append(code[i])
                i += 1
        if i < n:
            out.append(quote)
            i += len(quote)
    if not changed:
        return None
    fixed = "".join(out)
    try:
        compile(fixed, "<call>", "exec")
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return None
    return fixed


def repair_call_tail(code: str) -> str | None:
    """``code`` without a leaked end of the JSON call on its last line, when the code does not
    parse as written and parses once that end is cut; else None (the code runs as written).

    Two shapes of the leak, both measured: the call's closing quote and brace inside the code
    (``print(x)\")}uff.``), and braces alone in place of the brackets the line still had to
    close (``print(m[m.idxmax()]}`` on the 1.5B, ``df['region']}}`` on the 0.5B): the braces
    are cut and the line's open brackets closed."""
    if _parses(code):
        return None
    head, _, last = code.rpartition("\n")
    prefix = head + "\n" if head else ""
    match = _CALL_TAIL.search(last)
    if match is not None:
        fixed = prefix + last[:match.start()].rstrip()
        if fixed.strip() and _parses(fixed):
            return fixed
    braces = _BRACE_TAIL.search(last)
    if braces is not None:
        body = last[:braces.end()].rstrip()
        for count in range(1, body.count("}", braces.start()) + 1):  # the fewest braces first
            cut = prefix + body[:-count].rstrip()
            still_open = _open_brackets(cut)
            if still_open is None or "{" in still_open:
                continue  # a brace the code needs is not a leak
            fixed = cut + "".join(_CLOSING[b] for b in reversed(still_open))
            if fixed.strip() and _parses(fixed):
                return fixed
    return None


# a line that holds only the answer form the question asked: ``@key[value]`` tags (and a comment)
_ANSWER_FORM_LINE = re.compile(r"(?:@[A-Za-z_]\w*\[[^\]\n]*\]\s*)+(?:#[^\n]*)?")


class TextToolCallStream:
    """Re-emits the events of a ``tool_choice: "none"`` request, turning a reply that is a
    JSON call into a tool call (prose passes through as text)."""

    def __init__(self, tools: list[Any] | None, *, fenced: bool = False) -> None:
        self.tools = _tool_specs(tools)
        self.fenced = fenced  # a reply opening with a fence is the python call (fenced.py)
        self.fence_kind: str | None = None  # None (undecided), "call", "answer" (_on_fence)
        self.fence_sent = 0  # how much of the buffer the call's deltas carried
        self.output: AssistantMessage | None = None
        self.mode: str | None = None  # None (undecided), "text", "call", "fence"
        self.buffer = ""
        self.index = -1

    def _emit_text(self, delta: str) -> list[AssistantMessageEvent]:
        assert self.output is not None
        events: list[AssistantMessageEvent] = []
        if self.index < 0:
            self.output.content.append(TextContent(text=""))
            self.index = len(self.output.content) - 1
            events.append(TextStartEvent(content_index=self.index, partial=self.output))
        block = self.output.content[self.index]
        assert isinstance(block, TextContent)
        # block.text += delta in place, and its event (once per token)
        events.append(append_delta(block, "text", delta, TextDeltaEvent, "text_delta", self.index, self.output))
        return events

    def _emit_call_delta(self, delta: str) -> list[AssistantMessageEvent]:
        assert self.output is not None
        events: list[AssistantMessageEvent] = []
        if self.index < 0:
            self.output.content.append(ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name="", arguments={}))
            self.index = len(self.output.content) - 1
            events.append(ToolCallStartEvent(content_index=self.index, partial=self.output))
        block = self.output.content[self.index]
        assert isinstance(block, ToolCall)
        partial = parse_streaming_json(self.buffer)
        name = partial.get("name")
        if isinstance(name, str) and (name in self.tools or (name := self._completed(name))):
            # named as soon as the name can only be one offered tool: the card says which
            # tool is being written instead of "tool" for the tokens the name takes
            block.name = name
        arguments = partial.get("arguments")
        if isinstance(arguments, dict):
            block.arguments = arguments
        events.append(delta_event(ToolCallDeltaEvent, "toolcall_delta", self.index, delta, self.output))
        return events

    def _completed(self, prefix: str) -> str:
        """The one offered tool whose name starts with ``prefix`` ('' when none or several)."""
        if not prefix:
            return ""
        found = [t for t in self.tools if t.startswith(prefix)]
        return found[0] if len(found) == 1 else ""

    def _on_text(self, delta: str) -> list[AssistantMessageEvent]:
        self.buffer += delta
        if self.mode is None:
            stripped = self.buffer.lstrip()
            if not stripped:
                return []
            if self.fenced and stripped.startswith("`"):
                self.mode = "fence"
                return self._on_fence()
            self.mode = "call" if stripped.startswith("{") else "text"
            delta = self.buffer if self.mode == "text" else delta
            if self.mode == "call":
                return self._emit_call_delta(self.buffer)
        if self.mode == "fence":
            return self._on_fence()
        return self._emit_text(delta) if self.mode == "text" else self._emit_call_delta(delta)

    def _on_fence(self) -> list[AssistantMessageEvent]:
        """A block streaming. What it is waits for its first line of code: the answer form
        alone there (``@top_hotel[Alder]``, which no Python is) makes the block the answer, as
        the model meant it (measured on the 1.5B: after a result that showed the value, it
        wrapped the answer in a block like the call before it); any other block is the call,
        streamed from there on."""
        if self.fence_kind is None:
            if "\n" not in self.buffer.lstrip().partition("\n")[2] and code_of_block(self.buffer) is None:
                return []  # the first line of code is not complete yet
            first = open_block_code(self.buffer).partition("\n")[0] or (code_of_block(self.buffer) or "")
            self.fence_kind = "answer" if _ANSWER_FORM_LINE.fullmatch(first.strip()) else "call"
            if self.fence_kind == "call":
                return self._emit_fence_delta(self.buffer)
            return []
        if self.fence_kind == "call":
            return self._emit_fence_delta(self.buffer[self.fence_sent:])
        return []

    def _emit_fence_delta(self, delta: str) -> list[AssistantMessageEvent]:
        """A fenced block streaming: the python call, its code as written so far."""
        assert self.output is not None
        events: list[AssistantMessageEvent] = []
        if self.index < 0:
            self.output.content.append(ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=FENCED_TOOL,
                                                arguments={}))
            self.index = len(self.output.content) - 1
            events.append(ToolCallStartEvent(content_index=self.index, partial=self.output))
        block = self.output.content[self.index]
        assert isinstance(block, ToolCall)
        block.arguments = {"code": open_block_code(self.buffer)}
        self.fence_sent = len(self.buffer)
        events.append(delta_event(ToolCallDeltaEvent, "toolcall_delta", self.index, delta, self.output))
        return events

    def _finish_fence(self) -> list[AssistantMessageEvent]:
        """The block is in: its code, exactly as written, is the python call's ``code`` (no
        JSON stood between the model and the code, so nothing is repaired)."""
        assert self.output is not None
        events: list[AssistantMessageEvent] = []
        code = code_of_block(self.buffer)
        if self.fence_kind is None:
            first = (open_block_code(self.buffer) if code is None else code).partition("\n")[0]
            self.fence_kind = "answer" if _ANSWER_FORM_LINE.fullmatch(first.strip()) else "call"
        if self.fence_kind == "answer":
            answer = (open_block_code(self.buffer) if code is None else code).strip()
            events += self._emit_text(answer)
            block_text = self.output.content[self.index]
            assert isinstance(block_text, TextContent)
            events.append(TextEndEvent(content_index=self.index, content=block_text.text, partial=self.output))
            return events
        if self.index < 0:
            events += self._emit_fence_delta(self.buffer)
        block = self.output.content[self.index]
        assert isinstance(block, ToolCall)
        block.arguments = {"code": open_block_code(self.buffer) if code is None else code}
        events.append(ToolCallEndEvent(content_index=self.index, tool_call=block, partial=self.output))
        return events

    def _finish_call(self) -> list[AssistantMessageEvent]:
        """The whole JSON is in: name it (recovering an unknown name), or keep the unknown name
        so the agent answers it with a tool error."""
        assert self.output is not None
        events: list[AssistantMessageEvent] = []
        if self.index < 0:
            events += self._emit_call_delta("")
        block = self.output.content[self.index]
        assert isinstance(block, ToolCall)
        cut = False
        try:
            parsed = json.loads(self.buffer.strip())
        except ValueError:
            parsed = parse_streaming_json(self.buffer)
            cut = True  # the reply ended inside the call
        name = parsed.get("name") if isinstance(parsed, dict) else None
        if cut and isinstance(name, str) and name not in self.tools:
            name = self._completed(name) or name  # cut inside its name: the tool it was writing
        arguments = parsed.get("arguments") if isinstance(parsed, dict) else None
        if not isinstance(arguments, dict):
            arguments = {}
        if not isinstance(name, str) or not name:
            match = _NAME_RE.search(self.buffer)
            name = match.group(1) if match else ""
        note = None
        if name not in self.tools:
            recovered = recover_tool_name(name, arguments, self.tools)
            if recovered is not None:
                note = (f"{NOTE_PREFIX}the model called `{name or '?'}`, which is not a tool; "
                        f"its arguments fit `{recovered}`, so it runs as `{recovered}`.")
                name = recovered
            else:
                # (a reply that ended inside the call, aborted, cut at its limit or by a lost
                # connection, says why itself: the model did not fail to form it)
                if not cut:
                    note = f"{NOTE_PREFIX}{TOOLCALL_FAILURE_HINT} (it called `{name or '?'}`)."
                name = name or "invalid_tool_call"
        code = arguments.get("code")
        if isinstance(code, str):
            repaired = escapes_in_literals(code) or repair_call_tail(code)
            if repaired is not None:
                arguments = {**arguments, "code": repaired}
        block.name = name
        block.arguments = arguments
        if note is not None:
            # the note goes before the call, so the transcript reads in order
            self.output.content.insert(self.index, TextContent(text=note))
            self.index += 1
        events.append(ToolCallEndEvent(content_index=self.index, tool_call=block, partial=self.output))
        return events

    def _close_block(self) -> list[AssistantMessageEvent]:
        assert self.output is not None
        if self.mode == "call":
            return self._finish_call()
        if self.mode == "fence":
            return self._finish_fence()
        if self.mode == "text" and self.index >= 0:
            block = self.output.content[self.index]
            assert isinstance(block, TextContent)
            return [TextEndEvent(content_index=self.index, content=block.text, partial=self.output)]
        return []

    async def convert(self, inner: AsyncIterator[AssistantMessageEvent]) -> AsyncIterator[AssistantMessageEvent]:
        async for event in inner:
            if event.type == "start":
                self.output = event.partial.model_copy(update={"content": []})
                yield StartEvent(partial=self.output)
                continue
            if self.output is None:
                yield event
                continue
            if event.type == "text_delta":
                for out in self._on_text(event.delta):
                    yield out
            elif event.type == "toolcall_end":
                # the server parsed a call after all (mode "server"): what streamed before it
                # ends as its own block, the call passes through, and text after it (if any)
                # opens a block of its own
                for out in self._close_block():
                    yield out
                self.mode, self.buffer, self.index = None, "", -1
                self.fence_kind, self.fence_sent = None, 0
                self.output.content.append(event.tool_call)
                index = len(self.output.content) - 1
                yield ToolCallStartEvent(content_index=index, partial=self.output)
                yield ToolCallEndEvent(content_index=index, tool_call=event.tool_call, partial=self.output)
            elif event.type in ("done", "error"):
                final = event.message if event.type == "done" else event.error
                for out in self._close_block():
                    yield out
                result = self.output
                for field in ("usage", "response_id", "timestamp", "model", "api", "provider"):
                    if hasattr(final, field):
                        setattr(result, field, getattr(final, field))
                if event.type == "error":
                    result.stop_reason = final.stop_reason
                    result.error_message = friendly_error(final.error_message)
                    yield ErrorEvent(reason=event.reason, error=result)
                    return
                has_call = any(isinstance(b, ToolCall) for b in result.content)
                result.stop_reason = "toolUse" if has_call else final.stop_reason
                reason = result.stop_reason
                if reason == "toolUse" and final.stop_reason == "length":
                    reason = result.stop_reason = "length"  # a cut call: the loop reports it
                yield DoneEvent(reason=reason, message=result)  # type: ignore[arg-type]  # a pi stop reason
                return
            # text_start / text_end / thinking / toolcall_start / toolcall_delta of the inner
            # stream: re-derived above from the deltas

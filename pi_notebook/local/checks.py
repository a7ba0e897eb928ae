"""Checks of a small model's run against the kernel state (docs/design/local-model.md).

Applied with the small-model profile (local/apply.py), for each run:

- **the outcome, not the phrasing.** When the model answers, what the request asked to leave
  behind (intent.expected_outcomes: a named variable, a new column, a
  figure) is looked up in the user's namespace and the run's tool results. When it is missing
  the model gets one precise corrective turn ("Check: `top3` does not exist. Assign the result
  to `top3`."), a user turn typed as the product's (``CheckMessage``): the model reads the
  instruction, a person what was found, under "pi_notebook check".
- **every value from a result.** The names, labels, dates and numbers the answer states
  (tool_calls.stated_values) must appear in the prompt's tool outputs, the user's words or the
  notebook's names; otherwise one corrective turn names them ('Check: no output shows
  "Apple"...'). One correction of each kind per prompt, so a run always ends. A value the
  model's own code printed as a literal (``print('apple')``, ``x = 'apple'; print(x)``) is not
  a result: it is cut from that call's output and from the code before grounding.
- **the form asked.** A question that states its answer form (``end with @mean_fare[value]``,
  intent.requested_format) gets one corrective turn when the answer lacks a tag or leaves its
  placeholder ('Check: the question asks for the answer as @mean_fare[value]...'); its values
  are checked like any other (a tagged number no output shows is a values correction).
- **a failing call is not repeated.** A call identical to one that already failed in this
  prompt is not run; its result says so and asks for another approach or an honest answer.
  Sent again after it was blocked (the same call blocked twice), the request ends with what
  is known: the next reply is made that sentence (tool_calls.FORCED_REPLY_MARK).
- **paths as the user wrote them.** Code that reads a file path that neither the request, an
  earlier message nor one of the user's cells wrote is not run; the result names the data
  already in the notebook (the 0.5B read a non-existent ``data.csv`` with ``df`` present).

Everything here is plain data in, a decision out; the hooks are the Agent's
``should_stop_after_turn`` and ``before_tool_call``. The checks run no user code: a namespace
value is looked into only when its type is pandas' own DataFrame (found by ``type()``, which
no object can intercept; a flask ``LocalProxy`` raises on any attribute, a lazy frame computes
on ``len``), the answer's values are checked in its first ``MAX_ANSWER_CHARS`` characters, and
a check that raises decides nothing: the run goes on as if it had passed.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agent.types import BeforeToolCallResult, CheckMessage
from ..tools.output.updates import IMAGE_MIMES
from .intent import FORMAT_TAG, Outcome, expected_outcomes, requested_format
from .tool_calls import CHECK_PREFIX, FORCED_REPLY_MARK, FORMAT_CHECK_MARK, NOTE_PREFIX, VALUES_CHECK_MARK, grounded_numbers, ungrounded_values

from ..ai.types import AssistantMessage, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from ..agent.types import AgentMessage, BeforeToolCallContext, ShouldStopAfterTurnContext

# A value in the user's namespace: anything the user made, read by duck typing (a DataFrame's
# columns and rows), so untyped on purpose (tests/magics/test_no_any.py lists it)
UserValue = Any
# a message's content: its text, or its content blocks
Content = str | Iterable[object] | None

__all__ = ["CHECK_PREFIX", "MAX_ANSWER_CHARS", "NamespaceSnapshot", "check_message", "RunChecks", "missing_outcome", "printed_literals", "read_paths",
           "without_error_quotes", "without_literals"]

_VALUES = VALUES_CHECK_MARK  # the words that mark a values correction
_FORMAT = FORMAT_CHECK_MARK  # ... and a format correction (its next answer ends in the tags: tool_calls)
_PLACEHOLDERS = frozenset({"", "value", "name", "count", "values", "number", "yyyy-mm", "none", "..."})
_MAX_LABEL_ROWS = 20_000
_MAX_LABELS = 2_000
# the part of an answer whose values are checked: a reply of 70,000 numbers took 14 s to check
MAX_ANSWER_CHARS = 4_000


def _text(content: Content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(getattr(b, "text", "")) for b in content or () if getattr(b, "type", "") == "text")


def _typed(content: Content) -> str:
    """What the user typed: a string, or the last text part (the notebook context travels as a
    part before it: magics/context.py)."""
    if isinstance(content, str):
        return content
    texts = [str(getattr(b, "text", "")) for b in content or () if getattr(b, "type", "") == "text"]
    return texts[-1] if texts else ""


def _user_names(user_ns: Mapping[str, UserValue]) -> list[str]:
    """The notebook's own names, not IPython's bookkeeping (``_i1``, ``_3``: their digits
    grounded "branch 1" and "January 1, 1." when every call had failed)."""
    return [k for k in user_ns if not k.startswith("_") and k not in ("In", "Out")]


def _is_check(message: AgentMessage) -> bool:
    return getattr(message, "role", None) == "user" and _text(_content(message)).startswith(CHECK_PREFIX)


def _content(message: AgentMessage) -> Content:
    """A message's content (a custom message may have none)."""
    return getattr(message, "content", None)


def _tool_results(messages: Iterable[AgentMessage]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def _tool_calls(messages: Iterable[AgentMessage]) -> list[ToolCall]:
    """The tool calls of the assistant messages in ``messages``, in order."""
    return [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolCall)]


class NamespaceSnapshot:
    """The user's names at the start of a run: what existed (by identity) and the DataFrames'
    columns, so "the result exists" means it was made or replaced by this run."""

    def __init__(self, user_ns: Mapping[str, UserValue]) -> None:
        self.ids = {k: id(v) for k, v in user_ns.items() if not k.startswith("_")}
        self.columns = {str(c) for v in user_ns.values() for c in _columns(v)}

    def made(self, user_ns: Mapping[str, UserValue], name: str) -> bool:
        return name in user_ns and self.ids.get(name) != id(user_ns[name])

    def new_names(self, user_ns: Mapping[str, UserValue]) -> list[str]:
        return [k for k in user_ns if not k.startswith("_") and self.made(user_ns, k)]


_FRAME_MEMBERS = ("__len__", "__getitem__", "__getattr__", "__getattribute__", "columns")


def _pandas_frame(value: UserValue) -> bool:
    """``value`` is a pandas DataFrame whose length, columns and items are pandas' own, so
    reading them runs no user code (``type`` and ``issubclass`` do not call into the object)."""
    pandas = sys.modules.get("pandas")
    frame = getattr(pandas, "DataFrame", None) if pandas is not None else None
    if not isinstance(frame, type) or not issubclass(type(value), frame):
        return False
    cls = type(value)
    return all(getattr(cls, member, None) is getattr(frame, member, None) for member in _FRAME_MEMBERS)


def _columns(value: UserValue) -> list[object]:
    if not _pandas_frame(value):
        return []
    try:
        return list(value.columns)[:200]
    except Exception:  # an unusual frame: no columns rather than a failed check
        return []


def _labels(user_ns: Mapping[str, UserValue]) -> list[str]:
    """The categories of the notebook's small DataFrames (their text columns' values) and their
    column names: an answer that states one of these states a result."""
    labels: list[str] = []
    for name, value in user_ns.items():
        if name.startswith("_") or not _pandas_frame(value):
            continue
        labels += [str(c) for c in _columns(value)]
        try:
            if len(value) > _MAX_LABEL_ROWS:
                continue
            for column in list(value.columns)[:30]:
                series = value[column]
                if str(series.dtype) in ("object", "string", "str", "category") or str(series.dtype).startswith("string"):
                    labels += [str(v) for v in series.dropna().unique()[:200]]
        except Exception:  # a frame that cannot be read cheaply gives no labels
            continue
        if len(labels) > _MAX_LABELS:
            break
    return labels[:_MAX_LABELS]


def _display_data(output: object) -> Mapping[str, object]:
    """The MIME bundle of a display output (a record, or its dict form in a loaded session)."""
    if isinstance(output, Mapping):
        data = output.get("data") if output.get("kind", "display") == "display" else None
    else:
        data = getattr(output, "data", None) if getattr(output, "kind", "") == "display" else None
    return data if isinstance(data, Mapping) else {}


def _has_figure(results: Iterable[ToolResultMessage]) -> bool:
    """A call showed an image: attached for a model that takes images, or (for a text-only
    model, which is sent none) among the call's display outputs."""
    for message in results:
        if any(getattr(b, "type", "") == "image" for b in message.content):
            return True
        details = getattr(message, "details", None)
        outputs = details.get("outputs") if isinstance(details, Mapping) else getattr(details, "outputs", None)
        if any(mime in _display_data(o) for o in outputs or () for mime in IMAGE_MIMES):
            return True
    return False


def missing_outcome(outcome: Outcome, user_ns: Mapping[str, UserValue], before: NamespaceSnapshot,
                    results: list[ToolResultMessage]) -> str | None:
    """The corrective message when ``outcome`` is not in the kernel state, else None. (No
    ``=`` or ``(`` in it: the provider then steers the next call to the assignment.)"""
    if outcome.kind == "variable":
        if before.made(user_ns, outcome.name):
            return None
        others = [n for n in before.new_names(user_ns) if n != outcome.name][:3]
        made = f" The code made {', '.join(f'`{n}`' for n in others)} instead." if others else ""
        state = "was not changed" if outcome.name in user_ns else "does not exist"
        return (f"{CHECK_PREFIX}`{outcome.name}` {state}.{made} Assign the result to "
                f"`{outcome.name}`.")
    if outcome.kind == "column":
        if any(outcome.name in map(str, _columns(v)) for k, v in user_ns.items() if not k.startswith("_")):
            return None
        return f"{CHECK_PREFIX}no DataFrame has a column `{outcome.name}` yet. Add the column `{outcome.name}`."
    if outcome.kind == "figure":
        if _has_figure(results):
            return None
        return f"{CHECK_PREFIX}no figure was shown. Plot it with matplotlib and show the plot."
    return None


# --- paths --------------------------------------------------------------------------------

_DATA_EXT = re.compile(r"\.(?:csv|tsv|txt|json|jsonl|xlsx?|parquet|feather|pkl|pickle|h5|hdf5|sqlite|db|"
                       r"npy|npz|xml|html?)$", re.IGNORECASE)


_WRITTEN_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:csv|tsv|txt|json|jsonl|xlsx?|parquet|feather|"
                           r"pkl|pickle|h5|hdf5|sqlite|db|npy|npz|xml|html?))(?![\w/-])", re.IGNORECASE)
_READ_CALL = re.compile(r"""\b(?:read\w*|load\w*|open)\(\s*(?:f|r)?['"]([^'"\n]+)['"]""")


def read_paths(code: str) -> list[str]:
    """File paths ``code`` reads: the first string argument of ``read_*`` / ``load*`` calls and
    of ``open`` without a writing mode (the code is parsed, not run)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # code that does not parse may still be fixed into a read of the same file: the paths
        # its calls name, found by pattern (measured: a SyntaxError next to read_csv('data.csv'))
        return [m for m in _READ_CALL.findall(code) if _DATA_EXT.search(m) or "/" in m]
    paths: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        if name == "open":
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                continue
        elif not (name.startswith("read") or name.startswith("load")):
            continue
        if _DATA_EXT.search(first.value) or "/" in first.value:
            paths.append((node.lineno, node.col_offset, first.value))
    return [path for _, _, path in sorted(paths)]


# --- values the model wrote itself ----------------------------------------------------------

_SHOWING_CALLS = frozenset({"print", "display", "Markdown", "HTML"})
_STRING_LITERAL = re.compile(r"""[rbfuRBFU]{0,2}(?:'[^'\n]*'|"[^"\n]*")""")


def _literal_nodes(node: ast.AST) -> list[ast.expr]:
    """The literal parts of an expression whose value is shown as written: a constant, the
    constant parts of an f-string, the items of a literal container, '...' + '...'."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) \
            and not isinstance(node.value, bool):
        return [node]
    if isinstance(node, ast.JoinedStr):
        return [n for v in node.values
                for n in ([v] if isinstance(v, ast.Constant) else
                          _literal_nodes(v.value) if isinstance(v, ast.FormattedValue) else [])]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _literal_nodes(e)]
    if isinstance(node, ast.Dict):
        return [n for e in [*node.keys, *node.values] if e is not None for n in _literal_nodes(e)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_nodes(node.left) + _literal_nodes(node.right)
    return []


def _shown_literal_nodes(tree: ast.AST) -> list[ast.expr]:
    """Literals the code shows or keeps as written: printed / displayed arguments, a bare
    expression statement, the value of a plain assignment (``x = 'apple'`` then ``print(x)``).
    Numbers only where printed or shown directly: ``n = 3`` then ``head(n)`` computes."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _SHOWING_CALLS:
                for arg in node.args:
                    found += _literal_nodes(arg)
        elif isinstance(node, ast.Expr):
            found += _literal_nodes(node.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            found += [n for n in _literal_nodes(node.value)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return found


def printed_literals(code: str) -> list[str]:
    """The values ``code`` prints, shows or assigns as literals it wrote itself (the 0.5B
    answered "apple" after ``print('apple')``): what such code outputs is the model's own
    guess, not a value computed from data. Values with no letter or digit are left out (a
    separator like ", " says nothing and cutting it would change numbers)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        values = [m.split(m[-1], 1)[1][:-1] for m in _STRING_LITERAL.findall(code) if m]
    else:
        values = [str(getattr(n, "value", "")) for n in _shown_literal_nodes(tree)]
    out: list[str] = []
    for value in values:
        value = value.strip()
        if value and any(c.isalnum() for c in value) and value not in out:
            out.append(value)
    return out


def without_literals(text: str, literals: Iterable[str]) -> str:
    """``text`` with every occurrence of ``literals`` cut (case aside; a number only as a whole
    number, not inside another: cutting ``5`` must not turn 15.5 into 1.)."""
    for literal in sorted(literals, key=len, reverse=True):
        if re.fullmatch(r"-?\d+(?:\.\d+)?", literal):
            text = re.sub(r"(?<![\w.])" + re.escape(literal) + r"(?![\w]|\.\d)", " ", text)
        else:
            text = re.sub(re.escape(literal), " ", text, flags=re.IGNORECASE)
    return text


def _code_by_call(messages: Iterable[AgentMessage]) -> dict[str, str]:
    """The code of each call in ``messages``, by call id."""
    return {b.id: str(b.arguments.get("code", "")) for b in _tool_calls(messages)}


def _shown_text(result: ToolResultMessage, code: Mapping[str, str]) -> str:
    """What a call's result shows, without the literals its own code printed (the model's
    guesses, which ground nothing)."""
    return without_literals(_text(result.content), printed_literals(code.get(result.tool_call_id, "")))


def without_error_quotes(answer: str, errors: Iterable[str]) -> str:
    """``answer`` without what it quotes of the error messages ``errors``: an error's message
    in full (with or without its exception name), or the part of it in the answer's brackets or
    quotes ("failed (could not convert string to float: '1,204.50 EUR')")."""
    for error in errors:
        message = error.partition(": ")[2]
        for quoted in sorted({error, message} - {""}, key=len, reverse=True):
            answer = answer.replace(quoted, " ")
        if not message:
            continue
        # a bracketed or quoted part of the answer that is a piece of the error's message
        for piece in re.findall(r"\(([^()]{3,})\)|'([^']{1,})'|\"([^\"]{1,})\"", answer):
            text = next(p for p in piece if p)
            if text.strip() and text.strip() in error:
                answer = answer.replace(text, " ")
    return answer


def _code_without_literals(code: str) -> str:
    """The code as a source of grounding: its names and its other literals (a column, an
    aggregation), but not the literals it shows as written."""
    try:
        ast.parse(code)
    except SyntaxError:
        return _STRING_LITERAL.sub(" ", code)
    return without_literals(code, printed_literals(code))


# --- the checks of one run ------------------------------------------------------------------

class RunChecks:
    """The per-run hooks; ``steer`` queues the corrective user message (``Agent.steer``)."""

    def __init__(self, user_ns: Mapping[str, UserValue], steer: Callable[[AgentMessage], object],
                 max_turns: int | None = None) -> None:
        self.user_ns = user_ns
        self.before = NamespaceSnapshot(user_ns)
        self.steer = steer
        self.max_turns = max_turns

    # the part of the conversation that belongs to the latest prompt
    @staticmethod
    def _since_prompt(messages: list[AgentMessage]) -> tuple[AgentMessage | None, list[AgentMessage]]:
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i]
            if getattr(message, "role", None) == "user" and not _is_check(message):
                return message, messages[i + 1:]
        return None, list(messages)

    def should_stop(self, ctx: ShouldStopAfterTurnContext, signal: object = None) -> bool:
        message = getattr(ctx, "message", None)
        is_answer = (getattr(message, "stop_reason", None) == "stop"
                     and not any(isinstance(b, ToolCall) for b in getattr(message, "content", ())))
        if is_answer:
            try:
                correction = self.correction(list(ctx.context.messages))
            except Exception:  # a check that cannot decide does not correct
                correction = None
            if correction is not None:
                self.steer(check_message(correction))
                return False
        if self.max_turns:
            since_user = 0
            for m in reversed(ctx.new_messages):
                if getattr(m, "role", None) == "user":
                    break
                since_user += getattr(m, "role", None) == "assistant"
            return since_user >= self.max_turns
        return False

    def correction(self, messages: list[AgentMessage]) -> str | None:
        """The corrective turn for the latest answer in ``messages``, or None (also when this
        kind of correction was already given for the prompt)."""
        prompt, after = self._since_prompt(messages)
        if prompt is None or not after:
            return None
        given = {_kind(_text(_content(m))) for m in after if _is_check(m)}
        results = _tool_results(after)
        request = _text(_content(prompt))
        if "final" in given:
            return None
        if "outcome" not in given:
            for outcome in expected_outcomes(request, self.before.ids, self.before.columns):
                message = missing_outcome(outcome, self.user_ns, self.before, results)
                if message is not None:
                    return message
        answer = _text(_content(after[-1])) if getattr(after[-1], "role", None) == "assistant" else ""
        answer = "\n\n".join(p for p in answer.split("\n\n") if not p.startswith(NOTE_PREFIX))
        if len(answer) > MAX_ANSWER_CHARS:  # whole words only: a cut number is another number
            answer = answer[:MAX_ANSWER_CHARS].rsplit(None, 1)[0]
        # (the prompt's own code too: "I grouped with `groupby`" quotes no result, but states
        # nothing it did not do; not the literals it printed or assigned: `print('apple')` is
        # the model's guess, so its output and its code ground nothing)
        code = _code_by_call(after)
        outputs = [_shown_text(m, code) for m in results]
        # (not the checks: they quote the values they question)
        users = [_text(_content(m)) for m in messages if getattr(m, "role", None) == "user" and not _is_check(m)]
        # what earlier requests' calls showed is shown too: a %followup ("by how much?")
        # answers from the output before it (measured: "north" flagged after it was printed)
        earlier = messages[:len(messages) - len(after)]
        earlier_code = _code_by_call(earlier)
        shown_before = [_shown_text(m, earlier_code) for m in _tool_results(earlier) if not m.is_error]
        sources = [request, *users, *outputs, *shown_before, *map(_code_without_literals, code.values()),
                   *self.before.ids, *self.before.columns, *_user_names(self.user_ns)]
        if not results or all(getattr(m, "is_error", False) for m in results):
            # nothing ran: no value was computed, so only the user's own words, the errors and
            # the notebook's names ground the answer, not the context's sample rows nor the
            # code (measured: "January 1, 1." after six blocked reads passed, its month and
            # digits found in the namespace summary's dates)
            # (of an error, its message: a traceback's line numbers are not results either)
            typed = [_typed(_content(m)) for m in messages if getattr(m, "role", None) == "user" and not _is_check(m)]
            # (an error message grounds what the answer quotes of it, "The code failed
            # (ValueError: could not convert '101.12 EUR')", and nothing else: "the mean price
            # is 101.12" took its value from the error, not from a result)
            answer = without_error_quotes(answer, [_last_error_line(o) for o in outputs])
            sources = [*typed, *shown_before, *self.before.ids, *self.before.columns, *_user_names(self.user_ns)]
        # the single-word literals it printed are values to look for too: the answer repeats
        # them in lowercase ("the product is apple"), where no capital marks them as a value
        guessed = [v for c in code.values() for v in printed_literals(c) if v.isidentifier()]
        missing = ungrounded_values(answer, sources, [*_labels(self.user_ns), *guessed])
        # a value the answer gives in the form asked (@key[value]) is presented as the result:
        # an output must show it, not an error message, the code or the question's own example
        missing += [v for v in unshown_tags(answer, _shown_by_results(results, code)) if v not in missing]
        if not missing:
            failed_only = bool(results) and all(m.is_error for m in results)
            return None if "format" in given else format_correction(request, answer, all_failed=failed_only)
        quoted = ", ".join(f'"{v}"' for v in missing[:5])
        errors = [_last_error_line(_text(m.content)) for m in results if m.is_error]
        all_failed = bool(results) and len(errors) == len(results)
        if _VALUES not in given:
            failed = " The code failed, so say what failed and what is not known." if all_failed else ""
            return (f"{CHECK_PREFIX}{_VALUES} {quoted}.{failed} State only values the "
                    "output shows, or run code that shows them.")
        # the second answer still states them: the run ends with what is known, in words
        # the model is made to write (tool_calls: FORCED_REPLY_MARK)
        return f"{CHECK_PREFIX}{_VALUES} {quoted} again. {FORCED_REPLY_MARK}{_what_is_known(results)}"

    def before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        try:
            return self._before_tool_call(ctx)
        except Exception:  # a check that cannot decide lets the call run
            return None

    def _before_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        call = ctx.tool_call
        messages = list(ctx.context.messages)
        _, after = self._since_prompt(messages)
        if _blocked_before(call, after):
            # the model sent a call again that was already not run: a third try would be the
            # same (measured: the 0.5B re-sent a blocked read six times), so the request ends
            # with what is known; the next reply is made that sentence
            results = _tool_results(after)
            self.steer(check_message(
                f"{CHECK_PREFIX}the same call was sent again after it was not run. "
                f"{FORCED_REPLY_MARK}{_what_is_known(results)}"))
            return BeforeToolCallResult(block=True, reason=(
                "Not run again: this exact call was already not run, so the request ends here."))
        repeated = _failed_before(call, after)
        if repeated is not None:
            return BeforeToolCallResult(block=True, reason=(
                "Not run: this is the same call that already failed "
                f"({repeated}). Running it again fails the same way: change the code, or answer "
                "that it failed and why."))
        code = str((call.arguments or {}).get("code", "")) if call.name == "python" else ""
        for path in read_paths(code):
            if not self._written_by_user(path, messages):
                return BeforeToolCallResult(block=True, reason=self._path_reason(path, messages))
        return None

    def _written_by_user(self, path: str, messages: list[AgentMessage]) -> bool:
        texts = [_text(_content(m)) for m in messages if getattr(m, "role", None) == "user"]
        cells = self.user_ns.get("In")
        if isinstance(cells, list):
            texts += [c for c in cells if isinstance(c, str)]
        # the whole path, as written: "x.csv" is not "shop/x.csv"
        written = re.compile(r"(?<![\w./-])" + re.escape(path) + r"(?![\w/-])")
        return any(written.search(t) for t in texts)

    def _path_reason(self, path: str, messages: Sequence[AgentMessage] = ()) -> str:
        # the files the user did name (measured: "load notebooks/data/sales.csv" read as
        # 'data/sales.csv', blocked, then sent again): the block says which path to use
        named = [p for m in messages if getattr(m, "role", None) == "user" and not _is_check(m)
                 for p in _WRITTEN_PATH.findall(_typed(_content(m))) if p != path]
        if named:
            return (f"Not run: no message or cell names the file {path!r}. The request names "
                    f"{named[-1]!r}: use that path, exactly as written.")
        frames = [k for k, v in self.user_ns.items()
                  if not k.startswith("_") and type(v).__name__ in ("DataFrame", "Series")][:3]
        if frames:
            have = ", ".join(f"`{f}`" for f in frames)
            return (f"Not run: no message or cell names the file {path!r}. The data is already in "
                    f"the notebook: {have}. Use it.")
        return (f"Not run: no message or cell names the file {path!r}. Use a file path exactly "
                "as the user wrote it.")


def _shown_by_results(results: list[ToolResultMessage], code: Mapping[str, str]) -> str:
    """What the calls' outputs show: each result without the literals its own code printed;
    of a failed call only what it printed before the error (the error's message and traceback
    quote the code and the data, they compute nothing), of a call not run nothing."""
    shown: list[str] = []
    for m in results:
        text = without_literals(_text(m.content), printed_literals(code.get(m.tool_call_id, "")))
        if m.is_error:
            text = re.split(r"\[(?:error|interrupted)\]", text, maxsplit=1)[0] if "[" in text else ""
        shown.append(text)
    return "\n".join(shown)


_TAG_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def unshown_tags(answer: str, shown: str) -> list[str]:
    """The values of the answer's ``@key[value]`` tags (placeholders aside) that ``shown`` does
    not show: a number by itself or a rounding of one it shows, a name or a date as written."""
    lowered = shown.lower()
    numbers = set(grounded_numbers([{"role": "user", "content": shown}]))
    missing: list[str] = []
    for match in FORMAT_TAG.finditer(answer):
        value = match.group(2).strip()
        if value.lower() in _PLACEHOLDERS:
            continue
        plain = value.strip("'\"` ").lstrip("$").rstrip("%").strip()
        number = plain.replace(",", "").lstrip("+-")
        if _TAG_NUMBER.fullmatch(number):
            trimmed = number.rstrip("0").rstrip(".") if "." in number else number
            found = number in numbers or trimmed in numbers
        else:
            found = bool(plain) and plain.lower() in lowered
        if not found and value not in missing:
            missing.append(value)
    return missing


def check_message(check: str) -> CheckMessage:
    """A check's corrective turn: ``check`` for the model (its instruction kept), and what a
    person reads of it (``shown``): what was found and what the agent was asked, in the
    product's words, never the model's instruction ("Reply exactly: ...")."""
    body = check.removeprefix(CHECK_PREFIX).split(FORCED_REPLY_MARK, 1)[0].strip()
    kind = _kind(check)
    if kind == _VALUES:  # 'no output shows "Apple", "3". State only ...': the quoted values
        found = re.match(r'no output shows (?:"[^"]*"(?:, )?)+', body)
        finding = found.group(0).rstrip(", ") if found else body
        asked = "to state only values its code's output shows"
    else:  # the first sentence says what was found ("`top3` does not exist")
        finding = re.split(r"(?<=[^.])\.(?:\s|$)", body, maxsplit=1)[0]
        asked = {"outcome": "to make what the request asked for",
                 "format": "to end in that form, with values its outputs show"}.get(
            kind, "to end with what the results show")
    finding = finding[:1].upper() + finding[1:]
    return CheckMessage(content=check, shown=f"{finding}: the agent was asked {asked}.")


def format_correction(request: str, answer: str, *, all_failed: bool = False) -> str | None:
    """The corrective turn for an answer without the ``@key[value]`` tags the request asks for
    (or with a placeholder in one), else None. After code that only failed there is no value to
    tag: the answer says so instead (nothing is made up to fill the form)."""
    keys = requested_format(request)
    if not keys or all_failed:
        return None
    given = {m.group(1): m.group(2).strip().lower() for m in FORMAT_TAG.finditer(answer)}
    lacking = [k for k in keys if given.get(k, "") in _PLACEHOLDERS]
    if not lacking:
        return None
    form = " ".join(f"@{k}[value]" for k in keys)
    return (f"{CHECK_PREFIX}{_FORMAT} {form}. End the answer with {' '.join('@' + k + '[...]' for k in keys)}, "
            "each holding the value an output above shows; if no output shows it, say what is not known.")


def _kind(check: str) -> str:
    if FORCED_REPLY_MARK in check:
        return "final"
    if _FORMAT in check:
        return "format"
    return _VALUES if _VALUES in check else "outcome"


_NOT_RUN = "Not run"


def _what_is_known(results: list[ToolResultMessage]) -> str:
    """The honest last sentence of a request whose answer no result supports: what failed, or
    that only the outputs shown are known."""
    failed = [m for m in results if m.is_error]
    if results and len(failed) == len(results):
        ran = [_last_error_line(_text(m.content)) for m in failed if not _text(m.content).startswith(_NOT_RUN)]
        if ran:
            return f"The code failed ({ran[-1]}), so I do not know the answer."
        reason = _text(failed[0].content).removeprefix(_NOT_RUN).lstrip(": ").split(". ")[0].rstrip(".")
        return f"The code was not run ({reason[:160]}), so I do not know the answer."
    if not results:
        return "No code ran for this request, so I do not know the answer."
    return ("The outputs above do not show the values my answer stated, so I cannot give "
            "them as the result: only the outputs above are known.")


def _blocked_before(call: ToolCall, messages: list[AgentMessage]) -> bool:
    """An identical earlier call in ``messages`` was not run (blocked by these checks)."""
    key = _call_key(call)
    blocked = {m.tool_call_id for m in _tool_results(messages)
               if m.is_error and _text(m.content).startswith(_NOT_RUN)}
    return any(b.id in blocked and b.id != call.id and _call_key(b) == key for b in _tool_calls(messages))


_CODE_PLACE = re.compile(r"\s*\(<agent-code-\d+>, line \d+\)")


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = next((x for x in lines if "Error" in x or "error" in x), lines[-1] if lines else "an error")
    # (where in the agent's code it failed says nothing to the user, and its digits would read
    # as values in the honest answer: "(<agent-code-2>, line 1)")
    return _CODE_PLACE.sub("", line.removeprefix("[error] "))[:160]


def _call_key(call: ToolCall) -> str:
    arguments = dict(call.arguments or {})
    if isinstance(arguments.get("code"), str):
        arguments["code"] = "\n".join(line.rstrip() for line in arguments["code"].strip().splitlines()
                                      if line.strip())
    return call.name + json.dumps(arguments, sort_keys=True, default=str)


def _failed_before(call: ToolCall, messages: list[AgentMessage]) -> str | None:
    """The first line of the error of an identical earlier call in ``messages``, or None."""
    key = _call_key(call)
    failed = {m.tool_call_id: _text(m.content) for m in _tool_results(messages) if m.is_error}
    for block in _tool_calls(messages):
        if block.id in failed and block.id != call.id and _call_key(block) == key:
            lines = [line.strip() for line in failed[block.id].splitlines() if line.strip()]
            error = next((line for line in reversed(lines) if "Error" in line or "error" in line),
                         lines[-1] if lines else "an error")
            return error[:200]
    return None

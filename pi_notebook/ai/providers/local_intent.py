"""What a request names: the variable the user wants the result in.

"compute total revenue per region into totals", "load the CSV into a DataFrame called df",
"make a DataFrame north with ...": the 0.5B model computes the right value for each of these
and then shows it instead of assigning it (measured: 5 of 6 such requests; the rule "into x
means: assign to x" in the system prompt did not change that). ``requested_target(text)``
finds the name, and the first call of the prompt is constrained to assign it
(local_tools.tools_grammar's ``assign``). Only explicit spellings count; anything vaguer
returns None and the model is left free.

``requested_subject(text, context)``: the first notebook variable the request names as a word
("plot a bar chart of totals", "how many rows does df have?"), found in the prompt's notebook
context (its "Notebook variables" lines, tools/namespace.py). The first call's code then starts
with it (``totals.plot(...)``, ``df.shape``): the 0.5B otherwise reached for ``df`` whatever
the request named (measured: ``df['revenue'].plot(kind='bar')`` for "a bar chart of totals").
See docs/design/local-model.md.
"""

from __future__ import annotations

import keyword
import re

__all__ = ["requested_subject", "requested_target"]

_NAME = r"`?([A-Za-z_][A-Za-z0-9_]*)`?"
# (not "column": a new column is ``df["x"] = ...``, not a variable)
_KIND = r"(?:data\s*frame|df|series|variable|table|list|dict(?:ionary)?|array)"
# the most explicit spelling first: "called df" wins over "into a DataFrame ..."
_PATTERNS = [
    re.compile(rf"\b(?:called|named)\s+{_NAME}", re.IGNORECASE),
    re.compile(rf"\b(?:into|as)\s+(?:a\s+|the\s+)?(?:new\s+)?{_KIND}\s+{_NAME}", re.IGNORECASE),
    re.compile(rf"\binto\s+{_NAME}", re.IGNORECASE),
    re.compile(rf"\b(?:make|create|build|define)\s+(?:a\s+|the\s+)?(?:new\s+)?{_KIND}\s+{_NAME}",
               re.IGNORECASE),
    re.compile(rf"\b(?:save|store|keep|put)\s+(?:it|this|that|them|the\s+result)\s+(?:in|into|as)\s+{_NAME}",
               re.IGNORECASE),
]
# words that follow "into"/"as" without being a variable name
_NOT_NAMES = frozenset({
    "a", "an", "the", "it", "its", "this", "that", "them", "these", "those", "one", "two", "three",
    "some", "each", "every", "new", "my", "our", "your", "their", "well", "soon", "possible", "such",
    "follows", "much", "many", "long", "far", "memory", "account", "consideration", "groups", "bins",
    "integer", "integers", "float", "floats", "string", "strings", "int", "str", "list", "dict",
    "percent", "percentage", "csv", "json",
})

_COLUMN_BEFORE = re.compile(r"\bcolumns?\s*$", re.IGNORECASE)


def requested_target(text: str) -> str | None:
    """The variable name ``text`` asks the result to be stored in, or None."""
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            name = match.group(1)
            if name.lower() in _NOT_NAMES or keyword.iskeyword(name) or name.isdigit():
                continue
            if _COLUMN_BEFORE.search(text[max(0, match.start() - 30):match.start()]):
                continue  # "a column called price": a column, not a variable
            return name
    return None


_VARIABLES_HEADER = re.compile(r"^Notebook variables \(\d+\):$", re.MULTILINE)
_VARIABLE_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ", re.MULTILINE)
_WORD = re.compile(r"`?\b([A-Za-z_][A-Za-z0-9_]*)\b`?")


def notebook_variables(context: str) -> list[str]:
    """The names listed under "Notebook variables (n):" in a notebook-context block."""
    header = _VARIABLES_HEADER.search(context)
    if header is None:
        return []
    body = context[header.end():].split("\n\n", 1)[0]  # the summary ends at a blank line
    return _VARIABLE_LINE.findall(body)


def requested_subject(text: str, context: str) -> str | None:
    """The first word of ``text`` that names a notebook variable of ``context``, or None."""
    names = set(notebook_variables(context))
    if not names:
        return None
    for match in _WORD.finditer(text):
        if match.group(1) in names and not keyword.iskeyword(match.group(1)):
            return match.group(1)
    return None

"""What a request asks to leave behind: a named variable, a new column, a figure.

"compute total revenue per region into totals", "put the top 3 in top3", "I need big_rows to
hold ...", "make a DataFrame north with ...": the 0.5B model computes the right value for each
of these and then often shows it instead of assigning it. Two levers use what this module
finds: the first call of the prompt is constrained to start with the assignment
(tool_calls.tools_grammar's ``start``), and after the answer the magics check the kernel
state and give the model one corrective turn when the result is missing
(local/checks.py, docs/design/local-model.md).

The names are found by *where* a word stands, not by a list of phrasings (the old list,
"into X", "called X", "store it in X", missed "put ... in X" and the next spelling too):

- a **naming word** before it: ``called`` / ``named`` / ``call it`` / ``name it``;
- a **kind of value** before it: "a DataFrame north", "the series s", "a new table t";
- a **holding verb** after it: "X to hold ...", "X should contain ...", "X holding ...";
- a **preposition of destination** before it (``in``, ``into``, ``as``, ``to``) when the
  word ends its clause ("... in top3", "... as ranked and ...", "... into merged."): a
  result's name is the last word of what the user says about it;
- a word spelled as code (in backticks, or with ``_``, a digit or an inner capital) in any
  of these places, and also directly after the preposition when more words follow.

and then only kept when it can be a new variable: an identifier, not a keyword, not a
common English word of those places ("in descending order", "into integers", "as well"), not
an existing notebook variable or column after a preposition ("add a column to df": df is the
subject), not capitalised unless spelled as code ("the orders in Leeds": a value), not the
alias of an import. A column ("column price", "a price column") is a column outcome, not a
variable. Anything vaguer names nothing and the model is left free.

``requested_subject(text, listed)``: the first notebook variable the request names as a word
("plot a bar chart of totals", "how many rows does df have?"), among the variables the prompt's
notebook context lists (``ListedVariables``, read back by tools/context/namespace.py, which printed
them). The first call's code then starts
with it (``totals.plot(...)``, ``df.shape``): the 0.5B otherwise reached for ``df`` whatever
the request named.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from ..tools.context.namespace import ListedVariables

__all__ = ["Outcome", "expected_outcomes", "implicit_subject", "requested_subject", "requested_target",
           "requested_format", "FORMAT_TAG"]


@dataclass(frozen=True)
class Outcome:
    """Something a request should leave behind: ``variable`` / ``column`` ``name``, or a
    ``figure`` (no name)."""

    kind: Literal["variable", "column", "figure"]
    name: str = ""


_TOKEN = re.compile(r"`[^`\n]+`|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_`]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE_LIKE = re.compile(r"_|\d|[a-z][A-Z]")
_NAMING = frozenset({"called", "named"})
_NAMING_VERBS = frozenset({"call", "name"})
_KINDS = frozenset({"dataframe", "df", "series", "variable", "table", "list", "dict", "dictionary",
                    "array", "frame", "set", "tuple"})
# ("have" is not one: "how many rows does df have?")
_HOLDING = frozenset({"hold", "holds", "holding", "contain", "contains", "containing", "store", "keep",
                      "list", "include"})
_MODAL = frozenset({"to", "should", "must", "will", "shall", "can"})
# ("to" only before a word spelled as code: "add a column to df", "convert to integers")
_DESTINATION = frozenset({"in", "into", "as"})
# what ends a clause after a name: punctuation, conjunctions, the start of another phrase
_CLAUSE_END = frozenset({".", ",", ";", ":", "!", "?", ")", "and", "then", "so", "with", "that",
                         "which", "for", "please", "too", "also", "but", "or", "from", "using", "by"})
# words that stand in those places without naming a variable ("into account", "as well")
_NOT_NAMES = frozenset({
    "a", "an", "the", "it", "its", "this", "that", "them", "these", "those", "one", "two", "three",
    "some", "each", "every", "all", "any", "new", "my", "our", "your", "their", "his", "her", "me",
    "us", "you", "him", "well", "soon", "possible", "such", "follows", "much", "many", "long", "far",
    "memory", "account", "consideration", "groups", "bins", "buckets", "chunks", "pieces", "parts",
    "integer", "integers", "float", "floats", "string", "strings", "int", "str", "number", "numbers",
    "text", "date", "dates", "datetime", "percent", "percentage", "percentages", "csv", "json",
    "excel", "order", "descending", "ascending", "reverse", "total", "place", "general", "detail",
    "details", "particular", "short", "addition", "case", "time", "advance", "bulk", "common",
    "mind", "view", "use", "effect", "return", "result", "results", "output", "columns", "column",
    "rows", "row", "lowercase", "uppercase", "thousands", "millions", "decimals", "decimal",
    "dollars", "euros", "words", "part", "there", "here", "table", "list", "chart",
    "plot", "graph", "figure", "index", "days", "weeks", "months", "years", "hours", "minutes",
    # units a question states its answer in ("the mean rainfall in mm"), never a result's name
    "mm", "cm", "km", "kg", "mg", "ml", "ms", "sec", "secs", "seconds", "mins",
    "hrs", "kmh", "mph", "knots", "miles", "meters", "metres", "kilometers", "kilometres", "inches",
    "feet", "pounds", "grams", "kilograms", "liters", "litres", "celsius", "fahrenheit", "kelvin",
    "degrees", "usd", "eur", "gbp", "cents", "bytes", "kb", "mb", "gb",
    # connecting words that can follow a kind of value ("a DataFrame called x", "a list of")
    "called", "named", "with", "of", "for", "from", "by", "on", "at", "per", "where", "which",
    "containing", "holding", "and", "or", "to", "in", "into", "as",
})
_COLUMN = frozenset({"column", "col"})
_COLUMN_NEW = re.compile(r"\b(?:add|create|make|compute|give|derive|insert|append|new)\b", re.IGNORECASE)
_FIGURE = re.compile(r"\b(?:plot|plots|plotted|chart|graph|histogram|visuali[sz]e|draw|scatter|boxplot|"
                     r"heatmap|bar\s*chart|pie)\b", re.IGNORECASE)


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(word, spelled as code) pairs; backticks are stripped and mark code."""
    out: list[tuple[str, bool]] = []
    for raw in _TOKEN.findall(text):
        if raw.startswith("`"):
            inner = raw.strip("`").strip()
            out.append((inner, True))
        else:
            out.append((raw, bool(_IDENT.fullmatch(raw)) and bool(_CODE_LIKE.search(raw))))
    return out


def _usable(word: str, code: bool) -> bool:
    if not _IDENT.fullmatch(word) or keyword.iskeyword(word):
        return False
    if code:
        return True
    return word.lower() not in _NOT_NAMES and not word[0].isupper()


def _candidates(tokens: list[tuple[str, bool]]) -> list[tuple[int, str, bool]]:
    """(position, word, strong) for every word standing where a result's name stands; strong:
    named by a naming word, a kind of value or a holding verb (kept even when it exists)."""
    lowered = [w.lower() for w, _ in tokens]
    found: list[tuple[int, str, bool]] = []
    for i, (word, code) in enumerate(tokens):
        if not _usable(word, code):
            continue
        before = lowered[i - 1] if i else ""
        before2 = lowered[i - 2] if i > 1 else ""
        after = lowered[i + 1] if i + 1 < len(tokens) else ""
        after2 = lowered[i + 2] if i + 2 < len(tokens) else ""
        if before in _COLUMN or after in _COLUMN or (before in _NAMING and before2 in _COLUMN):
            continue  # a column, not a variable
        named = before in _NAMING or (before2 in _NAMING_VERBS and before == "it")
        kind = before in _KINDS and (before2 in {"a", "an", "the", "new"} or code)
        held = after in _HOLDING or (after in _MODAL and after2 in _HOLDING)
        if named or kind or held:
            found.append((i, word, True))
        elif before in _DESTINATION or (before == "to" and code):
            if before == "as" and "import" in lowered[max(0, i - 4):i]:
                continue  # "import pandas as pd"
            if after in ("", *_CLAUSE_END) or code:
                found.append((i, word, False))
    return found


# an answer form a question states: "end with @mean_fare[value]", "@city[name] @std[value]"
FORMAT_TAG = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\[([^\]\n]{0,80})\]")


def requested_format(text: str) -> list[str]:
    """The keys of the ``@key[...]`` tags ``text`` asks the answer to carry, in order."""
    return list(dict.fromkeys(m.group(1) for m in FORMAT_TAG.finditer(text)))


def expected_outcomes(text: str, known: Collection[str] = (), columns: Collection[str] = ()
                      ) -> list[Outcome]:
    """What ``text`` asks to leave behind. ``known``: the notebook's variable names; ``columns``:
    the columns of its DataFrames (neither can be a new name after a preposition). An answer
    form (``@mean_fare[value]``) names a tag of the answer, not a variable."""
    tokens = _tokens(FORMAT_TAG.sub(" ", text))
    outcomes: list[Outcome] = []
    known_set, column_set = set(known), set(columns)
    for _, word, strong in _candidates(tokens):
        if not strong and (word in known_set or word in column_set):
            continue
        outcome = Outcome("variable", word)
        if outcome not in outcomes:
            outcomes.append(outcome)
    if _COLUMN_NEW.search(text):
        lowered = [w.lower() for w, _ in tokens]
        for i, (word, code) in enumerate(tokens):
            near = {lowered[j] for j in (i - 1, i + 1) if 0 <= j < len(tokens)}
            named = i > 1 and lowered[i - 1] in _NAMING and lowered[i - 2] in _COLUMN
            # (not a word that ends a clause: "a new column using the ratio" names no column)
            if (near & _COLUMN or named) and _usable(word, code) and word not in column_set \
                    and word not in known_set and (code or word.lower() not in _CLAUSE_END):
                outcome = Outcome("column", word)
                if outcome not in outcomes:
                    outcomes.append(outcome)
                break
    if _FIGURE.search(text):
        outcomes.append(Outcome("figure"))
    return outcomes


def requested_target(text: str, known: Collection[str] = (), columns: Collection[str] = ()) -> str | None:
    """The (first) variable name ``text`` asks the result to be stored in, or None."""
    for outcome in expected_outcomes(text, known, columns):
        if outcome.kind == "variable":
            return outcome.name
    return None


_WORD = re.compile(r"`?\b([A-Za-z_][A-Za-z0-9_]*)\b`?")


_FILE_WORD = re.compile(r"[\w-]\.(?:csv|tsv|txt|json|jsonl|xlsx?|parquet|feather|pkl|pickle|h5|sqlite|db|"
                        r"npy|npz|xml|html?)\b", re.IGNORECASE)


def requested_subject(text: str, listed: ListedVariables) -> str | None:
    """The first word of ``text`` that names a listed notebook variable, or None."""
    names = set(listed.names)
    if not names:
        return None
    for match in _WORD.finditer(text):
        if match.group(1) in names and not keyword.iskeyword(match.group(1)):
            return match.group(1)
    return None


def implicit_subject(text: str, listed: ListedVariables) -> str | None:
    """The notebook's only DataFrame when ``text`` names no notebook variable and no file, else
    None: a question about "the customers" is about the data that is loaded (measured, the
    0.5B read a guessed ``loans.csv`` for "who borrowed the most books?" with ``loans`` loaded)."""
    if requested_subject(text, listed) is not None or _FILE_WORD.search(text):
        return None
    frames = listed.frames
    if len(frames) == 1 and not keyword.iskeyword(frames[0]):
        return str(frames[0])
    return None

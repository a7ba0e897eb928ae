"""A one-line hint for an error whose traceback lacks the one fact that fixes it.

- a missing key: "did you mean 'region' (a column of df)?";
- a common import alias that is not defined (``NameError: name 'plt' is not defined``): the
  import that defines it, "import matplotlib.pyplot as plt" (a small model forgets imports the
  user's notebook never made, and retries the same line);
- a package that is not installed (``ModuleNotFoundError``): say so, and name the analysis
  packages this kernel does have, so the next call uses one of them instead of retrying;
- a number written as text (``could not convert string to float: '1,204.50 EUR'``, pandas'
  ``Unable to parse string``): real columns carry units, currency signs and thousands commas,
  and a small model retries the same conversion; the hint says how to take the number out (or,
  for a value with no digits, how to turn it into a missing value).

Python suggests close names for a NameError or an AttributeError, pandas suggests nothing for
``df.groupby('regoin')`` or ``df['revenu']``: the error is a bare ``KeyError: 'regoin'``. A
model asked to fix it (measured on the 0.5B: three times the same failing line) and a user
reading the tool card both need the one fact the traceback lacks: which keys exist. The hint
looks only at DataFrame columns (metadata, no rows) and dict keys of the user namespace,
through ``difflib``; it says nothing when nothing is close.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import re
from collections.abc import Mapping
from typing import Any

from ..trust.redact import redact

__all__ = ["error_hint", "key_error_hint"]

_MAX_CANDIDATES = 5000  # keys looked at in all; a namespace of huge dicts costs no more than this


def _missing_key(evalue: str) -> str | None:
    try:
        key = ast.literal_eval(evalue.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return key if isinstance(key, str) and key else None


def _keys(value: Any) -> list[str] | None:
    cls = type(value)
    if cls.__module__.split(".")[0] == "pandas" and cls.__name__ == "DataFrame":
        return [c for c in value.columns[:_MAX_CANDIDATES] if isinstance(c, str)]
    if isinstance(value, dict):
        return [k for k in list(value)[:_MAX_CANDIDATES] if isinstance(k, str)]
    return None


# the aliases analysis code takes for granted, and the import that defines each
COMMON_IMPORTS = {
    "pd": "import pandas as pd", "np": "import numpy as np", "plt": "import matplotlib.pyplot as plt",
    "sns": "import seaborn as sns", "mpl": "import matplotlib as mpl", "stats": "from scipy import stats",
    "sp": "import scipy as sp", "tf": "import tensorflow as tf", "px": "import plotly.express as px",
    "pandas": "import pandas", "numpy": "import numpy", "math": "import math", "re": "import re",
    "json": "import json", "os": "import os", "datetime": "import datetime", "statistics": "import statistics",
}
# what a missing package's work is usually done with, in the order they are offered
_ANALYSIS_PACKAGES = ("pandas", "numpy", "matplotlib", "scipy", "seaborn", "statsmodels", "sklearn")
_NAME_ERROR = re.compile(r"^name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")
_NO_MODULE = re.compile(r"^No module named '([A-Za-z_][A-Za-z0-9_.]*)'")


def error_hint(ename: str, evalue: str, user_ns: Mapping[str, Any]) -> str | None:
    """The hint for an error (see the module docstring), or None when there is nothing to add."""
    if ename == "KeyError":
        return key_error_hint(ename, evalue, user_ns)
    if ename == "NameError":
        return _import_hint(evalue)
    if ename == "ModuleNotFoundError":
        return _missing_package_hint(evalue)
    if ename == "ValueError" and evalue.strip() == "pattern contains no capture groups":
        return ("str.extract returns only the parts of its pattern in parentheses: write the "
                "pattern with a group, e.g. `s.str.extract(r'([0-9.]+)')`")
    if ename == "ValueError":
        return _text_number_hint(evalue)
    if ename == "TypeError" and _TEXT_REDUCTION.match(evalue.strip()):
        return ("the column holds text, not numbers: convert it first, e.g. "
                "`pd.to_numeric(s.str.replace(r'[^0-9.-]', '', regex=True), errors='coerce')` for a column `s`")
    return None


# pandas' messages for a sum/mean of a text column
_TEXT_REDUCTION = re.compile(r"^(?:Cannot perform reduction '\w+' with string dtype|"
                             r"Could not convert (?:string )?'.*' to numeric|"
                             r"dtype '(?:str|string|object)' does not support operation|"
                             r"agg function failed \[how->\w+,dtype->(?:object|str|string)\])", re.DOTALL)


# the messages of Python's float()/int() and of pandas' to_numeric for a string that is no number
_TEXT_NUMBER = re.compile(
    r"^(?:could not convert string to float: |invalid literal for int\(\) with base \d+: |"
    r"Unable to parse string )(['\"])(.{0,80}?)\1")
_DIGIT = re.compile(r"\d")


def _text_number_hint(evalue: str) -> str | None:
    match = _TEXT_NUMBER.match(evalue.strip())
    if match is None:
        return None
    value = match.group(2)
    if not _DIGIT.search(value):
        return (f"{value!r} is not a number: make such values missing first, e.g. "
                "`pd.to_numeric(s, errors='coerce')`")
    return (f"{value!r} is a number written as text: take the number out before converting, e.g. "
            "`s.str.replace(r'[^0-9.-]', '', regex=True).astype(float)` for a column `s`")


def _import_hint(evalue: str) -> str | None:
    match = _NAME_ERROR.match(evalue.strip())
    if match is None or match.group(1) not in COMMON_IMPORTS:
        return None
    name = match.group(1)
    module = COMMON_IMPORTS[name].split()[1]
    if not _installed(module):
        return _missing_package_hint(f"No module named '{module}'")
    return f"{name} is not imported in this notebook: start the code with `{COMMON_IMPORTS[name]}`"


def _missing_package_hint(evalue: str) -> str | None:
    match = _NO_MODULE.match(evalue.strip())
    if match is None:
        return None
    package = match.group(1).split(".", 1)[0]
    if _installed(package):
        return None  # the package is there, a submodule is not: the message says it all
    have = [p for p in _ANALYSIS_PACKAGES if p != package and _installed(p)]
    use = f"; use what is installed: {', '.join(have)}" if have else ""
    return f"{package} is not installed in this kernel (do not install it){use}"


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package.split(".", 1)[0]) is not None
    except (ImportError, ValueError):
        return False


def key_error_hint(ename: str, evalue: str, user_ns: Mapping[str, Any]) -> str | None:
    """``did you mean 'region' (a column of df)?`` for a KeyError on a near-miss key, else None."""
    if ename != "KeyError":
        return None
    key = _missing_key(evalue)
    if key is None:
        return None
    seen = 0
    for name, value in list(user_ns.items()):
        if name.startswith("_") or seen >= _MAX_CANDIDATES:
            continue
        try:
            keys = _keys(value)
        except Exception:  # a lying object must not break the error report
            continue
        if not keys or key in keys:
            continue
        seen += len(keys)
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.75)
        if close:
            where = "a key of" if isinstance(value, dict) else "a column of"
            return redact(f"did you mean {close[0]!r} ({where} {name})?")
    return None

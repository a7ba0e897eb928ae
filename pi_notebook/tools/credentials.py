"""Credentials recognised by their shape, not only by an environment variable's name.

tools/redact.py replaces the *known* secrets (environment values under secret-looking names,
explicit API keys). Notebook data holds others the environment never saw: ``hdr = "Bearer
4f9a..."``, a DSN with a password, a PEM key, a JWT, a GitHub token pasted into a cell, a
password in a variable called ``pw``. This module is the one detector for those; the notebook
context surfaces (namespace summary, history, ``list_variables`` / ``inspect_variable``) use it:

- ``looks_like_credential(value, name="") -> bool``: the whole value is credential-shaped, or
  ``name`` looks like a credential's name (pw, pwd, pass, secret, token, key, credential,
  auth...) and the value is a non-trivial string (a passphrase of plain words counts too:
  "correct horse battery" is a password whatever its entropy).
- ``hidden_value(value) -> str``: what is shown instead of such a value,
  ``str len 33 (looks like a credential; value not shown)``.
- ``redact_shapes(text) -> str``: credential-shaped pieces of free text (printed output,
  source, exception messages) become ``[redacted]``: Authorization / Bearer / Basic values,
  the password of a URL, PEM blocks, JWTs, well-known token prefixes (``sk-``, ``ghp_``,
  ``xox?-``, ``AKIA``, ``AIza``, ``glpat-``, ``hf_``...), and the value of an assignment or
  ``name: value`` pair whose name is credential-like.
- ``redact_all(text)``: ``redact`` (known secrets) then ``redact_shapes``.

The patterns are linear-time regexes (no nested quantifiers), so any text costs one pass each.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from .redact import REDACTED, redact

__all__ = ["CREDENTIAL_NOTE", "credential_name", "hidden_value", "looks_like_credential",
           "redact_all", "redact_shapes"]

CREDENTIAL_NOTE = "looks like a credential; value not shown"

# A name that holds a credential: the common words, and the short ones only as whole parts
# of a snake/camel name (``pw``, ``pass``, ``key``), so ``compass`` or ``monkey`` do not count.
_NAME = re.compile(
    r"(?:secret|token|passw|passphrase|pwd|credential|auth|private|cookie|session|api_?key|apikey"
    r"|(?:^|_|\b)(?:pw|pass|key|cred|creds|sig|signature)(?:$|_|\b|\d))",
    re.IGNORECASE)

_TOKEN_PREFIXES = (
    r"sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}",
    r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"npm_[A-Za-z0-9]{30,}",
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # a JWT
)
_PREFIXED = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_TOKEN_PREFIXES) + r")")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}-----|\Z)")
# "Bearer <anything>"; "Basic/Token/Digest <x>" only when x has a digit ("basic statistics")
_AUTH_VALUE = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+)([A-Za-z0-9._~+/=\-]{8,})")
_AUTH_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|x-auth-token|cookie)"
    r"(\"?'?\s*[:=]\s*[\"']?)([^\s\"',;}]{4,}(?:\s+[^\s\"',;}]{4,})?)")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s/:@]{0,200}:)([^\s/@]{1,200})(@)")
# name = "value" / name: value / name=value, where the name is credential-like
_PAIR = re.compile(
    r"(?i)\b([A-Za-z_][A-Za-z0-9_]{0,60})(\"?'?\]?\s*(?:=|:)\s*)(?:([\"'])([^\"'\n]{1,400})\3"
    r"|([^\s\"',;})\]]{4,400}))")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z_.]*")  # an identifier or attribute, no digits
# values that are code, not a credential: literals, calls and lookups (``token = get()``)
_STRUCTURAL = re.compile(r"^(?:True|False|None|null|true|false|\d+|[A-Za-z_][A-Za-z0-9_.]*[(\[].*)$")


def credential_name(name: str) -> bool:
    """``name`` is the kind of name a credential is kept under."""
    return bool(name) and _NAME.search(name) is not None


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _shaped(value: str) -> bool:
    v = value.strip()
    if not v:
        return False
    if _PREFIXED.search(v) or _PEM.search(v) or _URL_PASSWORD.search(v):
        return True
    match = _AUTH_VALUE.match(v)
    return bool(match and _auth_value(match) != match.group(0))


def looks_like_credential(value: object, name: str = "") -> bool:
    """True when ``value`` (a str or bytes) must not be shown by value (module doc)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return credential_name(name)
    if not isinstance(value, str):
        return False
    if _shaped(value):
        return True
    if credential_name(name) and len(value.strip()) >= 4:
        return True
    # a lone high-entropy token with letters and digits (an API key under a neutral name)
    v = value.strip()
    return bool(20 <= len(v) <= 512 and re.fullmatch(r"[A-Za-z0-9_\-.+/=]+", v)
                and any(c.isdigit() for c in v) and any(c.isalpha() for c in v) and _entropy(v) >= 3.5)


def hidden_value(value: object) -> str:
    """The line shown instead of a credential: its type and length, never its text."""
    kind = type(value).__name__ if type(value) in (str, bytes, bytearray) else "str"
    try:
        size = len(value)  # type: ignore[arg-type]  # str/bytes only reach here
    except Exception:
        size = 0
    return f"{kind} len {size} ({CREDENTIAL_NOTE})"


def _auth_value(match: re.Match[str]) -> str:
    scheme, value = match.group(1), match.group(3)
    if scheme.lower() != "bearer" and not any(c.isdigit() for c in value):
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def _pair(match: re.Match[str]) -> str:
    name = match.group(1)
    if not credential_name(name):
        return match.group(0)
    value = match.group(4) if match.group(4) is not None else match.group(5)
    if value is None or _STRUCTURAL.match(value) or value == REDACTED:
        return match.group(0)
    if match.group(5) is not None and _PLAIN_NAME.fullmatch(value):
        return match.group(0)  # code: ``sorted(x, key=len)``, ``token=tok``; not a literal
    quote = match.group(3) or ""
    return f"{name}{match.group(2)}{quote}{REDACTED}{quote}"


def redact_shapes(text: str) -> str:
    """``text`` with credential-shaped pieces replaced by ``[redacted]`` (module doc)."""
    if not text:
        return text
    text = _PEM.sub(REDACTED, text)
    text = _PREFIXED.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    text = _AUTH_VALUE.sub(_auth_value, text)
    text = _PAIR.sub(_pair, text)
    return text


def redact_all(text: str) -> str:
    """Known secrets (tools/redact.py), then credential shapes."""
    return redact_shapes(redact(text))

"""Credentials recognised by their shape, not only by an environment variable's name.

tools/trust/redact.py replaces the *known* secrets (environment values under secret-looking names,
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
    r"xox[abposre]-[A-Za-z0-9\-]{10,}",
    r"xapp-\d-[A-Za-z0-9\-]{10,}",  # a Slack app-level token
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"npm_[A-Za-z0-9]{30,}",
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # a JWT
    # the first body line of a private key (DER of PKCS#1 RSA, PKCS#8, SEC1 EC, OpenSSH)
    r"(?:MII[A-Za-z0-9+/]{3}IBA(?:AK|DAN)|MHcCAQEE|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/=]*",
)
_PREFIXED = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_TOKEN_PREFIXES) + r")")
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}-----|\Z)")
# A PEM block encoded once more in base64 (a Kubernetes secret, an env file): "-----BEGIN "
# always encodes to this prefix; its wrapped continuation lines go with it.
_PEM_B64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/=]*(?:\r?\n[A-Za-z0-9+/=]{16,})*")
# A key's body without its BEGIN/END lines: two or more lines of exactly 64 base64 characters
# (the PEM width; base64 tools and MIME wrap at 76, an inline image is one line), then the
# shorter last line. The line breaks may be real or the two characters of a repr's "\n".
_NL = r"(?:\r?\n|\\n)[ \t]*"
_KEY_BODY = re.compile(r"(?:(?<![A-Za-z0-9+/=])|(?<=\\n))[A-Za-z0-9+/]{64}(?:" + _NL + r"[A-Za-z0-9+/]{64})+"
                       r"(?:" + _NL + r"[A-Za-z0-9+/]{1,63}={0,2})?(?![A-Za-z0-9+/=])")
# Connection strings (Azure storage and service bus, ODBC): ``...;AccountKey=...;``. The
# names are CamelCase, so only these spellings count ("monkey=1" is not a key).
_CONN_PAIR = re.compile(r"(?:(?<=^)|(?<=[;\s\"'?&]))((?:[A-Z][A-Za-z]*)?(?:Key|Password|Secret|Signature|Token)"
                        r"|PWD|Pwd|sig)(=)([^;&\s\"']{4,})")
# "Bearer <anything>"; "Basic/Token/Digest <x>" only when x has a digit ("basic statistics")
_AUTH_VALUE = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+)([A-Za-z0-9._~+/=\-]{8,})")
_AUTH_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|api-key|x-auth-token|cookie)"
    r"(\"?'?\s*[:=]\s*[\"']?)([^\s\"',;}]{4,}(?:\s+[^\s\"',;}]{4,})?)")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s/:@]{0,200}:)([^\s/@]{1,200})(@)")
# name = "value" / name: value / name=value, where the name is credential-like
# The closing quote is optional: pandas and reprlib cut a long value (``'hunter2hun...``).
_PAIR = re.compile(
    r"(?i)\b([A-Za-z_][A-Za-z0-9_]{0,60})(\"?'?\]?\s*(?:=|:)\s*)(?:([\"'])([^\"'\n]{1,400})[^\"'\n]*(\3?)"
    r"|([^\s\"',;})\]]{4,400}))")
# name = ["a", "b"] / name: ['a', 'b']: every string literal of the list under a credential name
_PAIR_LIST = re.compile(r"(?i)\b([A-Za-z_][A-Za-z0-9_]{0,60})(\"?'?\s*(?:=|:)\s*)\[([^\]\n]{1,4000})\]?")
_STRING_LITERAL = re.compile(r"([\"'])[^\"'\n]*(\1?)")
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
    value = match.group(4) if match.group(4) is not None else match.group(6)
    if value is None or _STRUCTURAL.match(value) or value == REDACTED:
        return match.group(0)
    if match.group(6) is not None and _PLAIN_NAME.fullmatch(value):
        return match.group(0)  # code: ``sorted(x, key=len)``, ``token=tok``; not a literal
    return f"{name}{match.group(2)}{match.group(3) or ''}{REDACTED}{match.group(5) or ''}"


def _pair_list(match: re.Match[str]) -> str:
    # the stricter test of a table's column: ``tokens = ['the', 'cat']`` is data
    if not _COLUMN_NAME.fullmatch(match.group(1)):
        return match.group(0)
    items = _STRING_LITERAL.sub(lambda m: m.group(1) + REDACTED + m.group(2), match.group(3))
    return match.group(0).replace(match.group(3), items, 1)


# --- tables: a column whose header is a credential's name -------------------------------------
#
# pandas prints a frame as a header line, then one line per row, values aligned under their
# header (right by default, left on request). In every line after a header up to a blank one,
# the text between the neighbouring headers is that column's value. A header line is indented
# (the index's room) or has a gap of two or more spaces; prose has neither, so "Enter your
# password below" is not taken for a header.

_WORD = re.compile(r"\S+")
# A column header (or a list's name) names a credential when its last part is a credential's
# word: "password", "db_password", "api_key", "access_token" (not "tokens": a list of words).
# Stricter than ``credential_name``, which also takes "author", "token_count", "primary_key"
# or "session_id": ordinary columns of data.
_COLUMN_NAME = re.compile(
    r"(?i)(?:[a-z0-9]+[_\-.])*(?:pass(?:word|wd|phrase)?|pwd|pw|secrets?|token(?!s)|api_?key|access_?key|secret_?key"
    r"|private_?key|credentials?|creds?|auth_?token|access_?token|refresh_?token|session_?token|cookie"
    r"|client_?secret|apikey)s?")


def _header_columns(line: str) -> list[tuple[int, int]] | None:
    """The (lo, hi) character range of each credential column when ``line`` is a header."""
    if not (line[:1].isspace() or "  " in line.strip()):
        return None
    words = list(_WORD.finditer(line))
    spans = []
    for i, word in enumerate(words):
        if _COLUMN_NAME.fullmatch(word.group(0)):
            lo = words[i - 1].end() + 1 if i else 0
            hi = words[i + 1].start() - 1 if i + 1 < len(words) else 1 << 30
            spans.append((lo, hi))
    return spans or None


def _redact_row(line: str, spans: list[tuple[int, int]]) -> str:
    for lo, hi in reversed(spans):
        piece = line[lo:hi]
        if piece.strip() and piece.strip() != REDACTED:
            start = lo + len(piece) - len(piece.lstrip())
            end = lo + len(piece.rstrip())
            line = line[:start] + REDACTED + line[end:]
    return line


def _redact_columns(text: str) -> str:
    if _NAME.search(text) is None:
        return text
    lines = text.split("\n")
    spans: list[tuple[int, int]] | None = None
    for i, line in enumerate(lines):
        if not line.strip():
            spans = None
            continue
        header = _header_columns(line)
        if header is not None:
            spans = header
        elif spans is not None:
            lines[i] = _redact_row(line, spans)
    return "\n".join(lines)


def redact_shapes(text: str) -> str:
    """``text`` with credential-shaped pieces replaced by ``[redacted]`` (module doc)."""
    if not text:
        return text
    text = _PEM.sub(REDACTED, text)
    text = _PEM_B64.sub(REDACTED, text)
    text = _KEY_BODY.sub(REDACTED, text)
    text = _PREFIXED.sub(REDACTED, text)
    text = _CONN_PAIR.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    text = _AUTH_VALUE.sub(_auth_value, text)
    text = _PAIR_LIST.sub(_pair_list, text)
    text = _PAIR.sub(_pair, text)
    return _redact_columns(text)


def redact_all(text: str) -> str:
    """Known secrets (tools/trust/redact.py), then credential shapes."""
    return redact_shapes(redact(text))

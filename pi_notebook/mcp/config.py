"""MCP server configuration in the ``mcpServers`` format users already have (Claude Desktop,
Cursor, notebook-intelligence).

::

    {"mcpServers": {
        "files": {"command": "python", "args": ["server.py"], "env": {"TOKEN": "${MY_TOKEN}"},
                  "cwd": "tools", "tools": ["read"], "autoApprove": ["read"], "timeout": 30,
                  "approval": "ask"},
        "web":   {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${WEB_KEY}"}},
        "old":   {"command": "old-server", "disabled": true}}}

Where it is read from, later sources overriding earlier ones server by server:
``~/.pi_notebook/mcp.json`` (the user's), the nearest ``.pi_notebook/mcp.json`` in the
notebook's folder or a parent up to the repository root (tools/context/project.py), the file named
by ``AgentMagics.mcp_config``; ``%agent mcp add`` adds session-only servers on top.

``${VAR}`` in ``env`` values and ``headers`` is taken from the kernel's environment, and
only the values named in ``env`` reach a stdio server (plus the SDK's short allow-list:
HOME, LOGNAME, PATH, SHELL, TERM, USER): a server never inherits the kernel's secrets by
accident. Every value that came from ``${VAR}``, and every header value, is registered for
redaction (tools/trust/redact.py) the moment it is read.

Problems are per server: a bad entry becomes a :class:`ServerConfig` with ``error`` set
(shown by ``%agent mcp``, never started); a file that cannot be read or parsed becomes a
notice. Nothing here raises for bad input.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..tools.context.project import project_dirs
from ..tools.context.project_files import project_root, read_project_file
from ..tools.trust.redact import add_secret

__all__ = ["ServerConfig", "LoadedConfig", "load_config", "parse_servers", "user_config_path",
           "project_config_path", "expand_vars", "CONFIG_NAME"]

CONFIG_NAME = Path(".pi_notebook") / "mcp.json"
# ${VAR}, and VS Code's spelling ${env:VAR}; ${input:ID} (a VS Code prompt) has no value here
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_INPUT = re.compile(r"\$\{input:([^}]*)\}")
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")

Transport = Literal["stdio", "http"]
APPROVALS = ("ask", "auto", "deny")


@dataclass
class ServerConfig:
    """One server entry, checked and with ``${VAR}`` expanded."""

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    disabled: bool = False
    tools: list[str] | None = None  # allow-list of MCP tool names; None: all
    auto_approve: list[str] = field(default_factory=list)  # MCP tool names run without asking
    timeout: float | None = None  # seconds per call; None: AgentMagics.mcp_timeout
    # "ask" | "auto" | "deny" for this server's tools instead of the run's policy (a run
    # under "deny" stays denied: gate.py); None: the run's policy
    approval: str | None = None
    source: str = ""  # where it came from (a path, "%agent mcp add")
    error: str | None = None  # why this entry cannot be used

    def describe(self) -> str:
        """The transport as a short label for ``%agent mcp`` (no header or env values)."""
        if self.transport == "http":
            return f"http {self.url}"
        return "stdio " + " ".join([self.command, *self.args]).strip()

    def same_launch(self, other: ServerConfig) -> bool:
        """Would ``other`` start the same server (so a running one may be kept)?"""
        keys = ("transport", "command", "args", "env", "cwd", "url", "headers")
        return all(getattr(self, k) == getattr(other, k) for k in keys)


@dataclass
class LoadedConfig:
    servers: dict[str, ServerConfig]
    files: list[Path]  # the files that were read, in order
    notices: list[str]  # one line each: files that could not be read or parsed


def user_config_path() -> Path:
    return Path.home() / CONFIG_NAME


def _home_root(path: Path) -> Path:
    home = Path.home()
    return home if path.parent == home or home in path.parents else path.parent


def project_config_path(start: str | Path) -> Path | None:
    """The nearest ``.pi_notebook/mcp.json`` from ``start`` up to the repository root."""
    for folder in project_dirs(start):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def expand_vars(text: str, environ: Mapping[str, str], where: str) -> tuple[str, list[str]]:
    """``text`` with every ``${VAR}`` replaced from ``environ``; also the substituted values.
    Raises ``KeyError`` (with a message naming the variable) when one is not set."""
    values: list[str] = []
    prompted = _INPUT.search(text)
    if prompted:
        raise KeyError(f"{where} uses ${{input:{prompted.group(1)}}}, which VS Code asks for when it starts "
                       f"the server; a kernel cannot ask: put the value in an environment variable and "
                       f"write ${{env:NAME}}")

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise KeyError(f"{where} uses ${{{name}}}, which is not set in the kernel's environment")
        values.append(environ[name])
        return environ[name]

    return _VAR.sub(sub, text), values


def _register(value: str) -> None:
    """A value that may be a secret: the whole of it, and each longer word of it (the token
    of ``Bearer <token>``), are redacted from now on (add_secret ignores short values)."""
    add_secret(value)
    for word in value.split():
        if word != value:
            add_secret(word)


def _str_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise ValueError(f"'{what}' must be an object of strings")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"'{what}.{key}' must be a string")
        out[key] = str(value)
    return out


def _str_list(raw: Any, what: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"'{what}' must be a list of strings")
    return list(raw)


def _server(name: str, raw: Any, source: str, environ: Mapping[str, str]) -> ServerConfig:
    clean = _NAME_OK.sub("_", name).strip("_").replace("__", "_") or "server"
    config = ServerConfig(name=clean, source=source)
    try:
        if not isinstance(raw, dict):
            raise ValueError("the entry must be an object")
        config.disabled = bool(raw.get("disabled", False))
        kind = raw.get("type")  # Claude Code's .mcp.json and VS Code's mcp.json name the transport
        if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
            if kind == "sse":
                raise ValueError("'type': 'sse' is the legacy SSE transport, which is not supported: "
                                 "give the server's streamable HTTP endpoint as 'url'")
            raise ValueError(f"'type' must be 'stdio' or 'http', not {kind!r}")
        if "tools" in raw and raw["tools"] is not None:
            config.tools = _str_list(raw["tools"], "tools")
        if raw.get("autoApprove") is not None:
            config.auto_approve = _str_list(raw["autoApprove"], "autoApprove")
        if raw.get("approval") is not None:
            approval = raw["approval"]
            if not isinstance(approval, str) or approval.strip().lower() not in APPROVALS:
                raise ValueError("'approval' must be one of: " + ", ".join(APPROVALS))
            config.approval = approval.strip().lower()
        if raw.get("timeout") is not None:
            timeout = raw["timeout"]
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
                raise ValueError("'timeout' must be a positive number of seconds")
            config.timeout = float(timeout)
        if raw.get("url"):
            if not isinstance(raw["url"], str) or not re.match(r"https?://", raw["url"]):
                raise ValueError("'url' must be an http:// or https:// URL")
            config.transport, config.url = "http", raw["url"]
            for key, value in _str_map(raw.get("headers"), "headers").items():
                expanded, _ = expand_vars(value, environ, f"headers.{key}")
                _register(expanded)  # a header value is a credential more often than not
                config.headers[key] = expanded
        elif raw.get("command"):
            if not isinstance(raw["command"], str):
                raise ValueError("'command' must be a string")
            config.command = raw["command"]
            config.args = _str_list(raw.get("args", []), "args")
            for key, value in _str_map(raw.get("env"), "env").items():
                expanded, used = expand_vars(value, environ, f"env.{key}")
                for secret in used:
                    _register(secret)
                if used:
                    _register(expanded)
                config.env[key] = expanded
            cwd = raw.get("cwd")
            if cwd is not None:
                if not isinstance(cwd, str):
                    raise ValueError("'cwd' must be a string")
                src = Path(source)  # relative to the project (or the config file's folder)
                base = (src.parent.parent if source.endswith(str(CONFIG_NAME))
                        else src.parent if src.suffix == ".json" else Path.cwd())
                config.cwd = str((base / Path(cwd).expanduser()).resolve())
        else:
            raise ValueError("needs 'command' (stdio) or 'url' (streamable HTTP)")
    except (ValueError, KeyError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        config.error = f"{source}: server {name!r}: {message}"
    return config


def parse_servers(data: Any, source: str, environ: Mapping[str, str] | None = None) -> dict[str, ServerConfig]:
    """The servers of one parsed file (``{"mcpServers": {...}}``, or VS Code's ``{"servers":
    {...}}`` so that ``AgentMagics.mcp_config`` can name a ``.vscode/mcp.json`` as it is);
    raises ValueError only when the file's shape is wrong as a whole."""
    environ = os.environ if environ is None else environ
    key = "servers" if isinstance(data, dict) and "mcpServers" not in data and "servers" in data else "mcpServers"
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        raise ValueError('expected {"mcpServers": {"name": {...}}}')
    servers: dict[str, ServerConfig] = {}
    for name, raw in data.get(key, {}).items():
        config = _server(str(name), raw, source, environ)
        servers[config.name] = config
    return servers


_MAX_CONFIG_BYTES = 1_000_000


def _read(path: Path, environ: Mapping[str, str], root: Path | None) -> dict[str, ServerConfig]:
    """One config file, read as a project file (tools/context/project_files.py: regular, inside
    ``root``, non-blocking, bounded); not redacted, since no one sees its text and its
    header values must stay usable."""
    read = read_project_file(path, _MAX_CONFIG_BYTES, root, redacted=False)
    if read.cut:
        raise ValueError(f"over {_MAX_CONFIG_BYTES:,} bytes")
    text = read.text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_servers(data, str(path), environ)


def load_config(start_dir: str | Path, explicit: str = "", *, environ: Mapping[str, str] | None = None,
                user_path: Path | None = None) -> LoadedConfig:
    """Every configured server (module doc for the order); never raises for bad files."""
    environ = os.environ if environ is None else environ
    user = user_path if user_path is not None else user_config_path()
    # where each file may resolve to: the user's own under their home folder (or its own folder),
    # the project's inside the project tree, an explicit one inside its own folder's project
    candidates: list[tuple[Path, Path | None]] = [(user, _home_root(user))]
    project = project_config_path(start_dir)
    if project is not None:
        candidates.append((project, project_root(start_dir)))
    notices: list[str] = []
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_absolute():
            path = Path(start_dir) / path
        if path.is_file():
            candidates.append((path, None))
        else:
            notices.append(f"MCP config {path} (AgentMagics.mcp_config) does not exist.")
    servers: dict[str, ServerConfig] = {}
    files: list[Path] = []
    seen: set[Path] = set()
    for path, root in candidates:
        try:
            resolved = path.resolve()
        except OSError:
            continue
        if resolved in seen or not path.is_file():
            continue
        seen.add(resolved)
        try:
            servers.update(_read(path, environ, root))
            files.append(path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            notices.append(f"MCP config {path} was not used: {exc}")
    return LoadedConfig(servers, files, notices)

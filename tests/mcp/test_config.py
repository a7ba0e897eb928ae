"""The mcpServers configuration: sources and their order, ${VAR}, secrets, bad entries."""

from __future__ import annotations

import json

from pi_notebook.mcp.config import load_config, parse_servers, project_config_path
from pi_notebook.tools.trust.redact import discard_secret, redact, secret_values


def _write(path, servers):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_stdio_and_http_entries_with_per_server_options():
    servers = parse_servers({"mcpServers": {
        "files": {"command": "python", "args": ["s.py"], "env": {"MODE": "ro"}, "tools": ["read"],
                  "autoApprove": ["read"], "timeout": 5},
        "web": {"url": "http://127.0.0.1:9/mcp"},
        "old": {"command": "x", "disabled": True}}}, "test", environ={})
    files, web, old = servers["files"], servers["web"], servers["old"]
    assert (files.transport, files.command, files.args, files.env) == ("stdio", "python", ["s.py"], {"MODE": "ro"})
    assert (files.tools, files.auto_approve, files.timeout) == (["read"], ["read"], 5.0)
    assert (web.transport, web.url) == ("http", "http://127.0.0.1:9/mcp")
    assert old.disabled and old.error is None


def test_var_expansion_registers_secrets_and_missing_vars_are_per_server_errors():
    token = "tok-" + "a1b2c3d4e5f6g7h8"
    try:
        servers = parse_servers({"mcpServers": {
            "a": {"command": "x", "env": {"API": "${MY_TOKEN}", "PLAIN": "value-not-secret"}},
            "b": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer literal-header-token"}},
            "c": {"command": "x", "env": {"K": "${NOT_SET_ANYWHERE}"}}}}, "cfg.json",
            environ={"MY_TOKEN": token})
        assert servers["a"].env["API"] == token
        assert redact(f"echo {token}") == "echo [redacted]"
        assert redact("Bearer literal-header-token") == "[redacted]"
        assert redact("literal-header-token") == "[redacted]"  # the token alone, too
        assert redact("value-not-secret") == "value-not-secret"  # plain values are not secrets
        assert servers["c"].error is not None and "NOT_SET_ANYWHERE" in servers["c"].error
        assert servers["a"].error is None and servers["b"].error is None
    finally:
        for value in (token, "Bearer literal-header-token", "literal-header-token"):
            discard_secret(value)
    assert token not in secret_values()


def test_bad_entries_are_errors_not_exceptions():
    servers = parse_servers({"mcpServers": {"n": {}, "t": {"command": "x", "timeout": -1},
                                            "u": {"url": "ftp://x"}, "l": {"command": "x", "args": "no"}}},
                            "f", environ={})
    assert all(s.error for s in servers.values()), {k: s.error for k, s in servers.items()}


def test_sources_in_order_nearest_project_file_up_to_the_repo_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    notebook_dir = repo / "analysis" / "deep"
    notebook_dir.mkdir(parents=True)
    user = _write(tmp_path / "home" / ".pi_notebook" / "mcp.json",
                  {"shared": {"command": "user-cmd"}, "mine": {"command": "u"}})
    _write(repo / ".pi_notebook" / "mcp.json", {"shared": {"command": "repo-cmd"}})
    _write(tmp_path / ".pi_notebook" / "mcp.json", {"outside": {"command": "never"}})  # above the repo
    explicit = _write(tmp_path / "extra.json", {"extra": {"url": "http://127.0.0.1:1/mcp"}})
    loaded = load_config(notebook_dir, str(explicit), environ={}, user_path=user)
    assert set(loaded.servers) == {"shared", "mine", "extra"}
    assert loaded.servers["shared"].command == "repo-cmd"  # the project overrides the user
    assert project_config_path(notebook_dir) == repo / ".pi_notebook" / "mcp.json"
    # outside a repository only the folder itself counts
    lonely = tmp_path / "lonely" / "sub"
    lonely.mkdir(parents=True)
    assert project_config_path(lonely) is None


def test_unreadable_files_are_notices(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    loaded = load_config(tmp_path, str(bad), environ={}, user_path=tmp_path / "none.json")
    assert loaded.servers == {} and len(loaded.notices) == 1 and "not valid JSON" in loaded.notices[0]
    missing = load_config(tmp_path, "nope.json", environ={}, user_path=tmp_path / "none.json")
    assert "does not exist" in missing.notices[0]


def test_cwd_is_relative_to_the_project(tmp_path):
    (tmp_path / ".git").mkdir()
    path = _write(tmp_path / ".pi_notebook" / "mcp.json", {"s": {"command": "x", "cwd": "tools"}})
    loaded = load_config(tmp_path, "", environ={}, user_path=tmp_path / "none.json")
    assert loaded.servers["s"].cwd == str((tmp_path / "tools").resolve())
    assert loaded.files == [path]


def test_a_per_server_approval_override_is_checked():
    servers = parse_servers({"mcpServers": {
        "a": {"command": "x", "approval": "Auto"}, "d": {"command": "x", "approval": "deny"},
        "n": {"command": "x"}, "bad": {"command": "x", "approval": "sometimes"}}}, "cfg.json", environ={})
    assert (servers["a"].approval, servers["d"].approval, servers["n"].approval) == ("auto", "deny", None)
    assert servers["bad"].error and "'approval' must be one of: ask, auto, deny" in servers["bad"].error


def test_files_other_tools_write_can_be_named_as_they_are():
    """Claude Code's .mcp.json (a 'type' per entry) and VS Code's .vscode/mcp.json ('servers',
    ${env:VAR}, ${input:ID}); a transport we do not speak is an entry error that says so."""
    token = "vs-" + "q9w8e7r6t5y4u3i2"
    try:
        vscode = parse_servers({"inputs": [{"id": "key", "type": "promptString"}], "servers": {
            "files": {"type": "stdio", "command": "python", "args": ["s.py"], "env": {"TOKEN": "${env:VS_TOKEN}"}},
            "web": {"type": "http", "url": "http://127.0.0.1:9/mcp"},
            "asks": {"type": "stdio", "command": "x", "env": {"KEY": "${input:key}"}},
            "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}, ".vscode/mcp.json",
            environ={"VS_TOKEN": token})
        assert vscode["files"].error is None and vscode["files"].env == {"TOKEN": token}
        assert redact(token) == "[redacted]"                     # a ${env:...} value is a secret too
        assert (vscode["web"].transport, vscode["web"].error) == ("http", None)
        assert "${input:key}" in (vscode["asks"].error or "") and "${env:NAME}" in (vscode["asks"].error or "")
        assert "legacy SSE" in (vscode["old"].error or "")
        claude = parse_servers({"mcpServers": {"t": {"type": "stdio", "command": "x"},
                                               "w": {"type": "websocket", "url": "http://127.0.0.1:9"}}},
                               ".mcp.json", environ={})
        assert claude["t"].error is None and "'stdio' or 'http'" in (claude["w"].error or "")
    finally:
        discard_secret(token)

"""Files the product reads on its own are only the user's project files (tools/context/project_files.py),
and every product-initiated read goes through that reader: AGENTS.md, the MCP config, the saved
notebook, a prompt's named files."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from pi_notebook.magics.instructions import load_instructions
from pi_notebook.mcp.config import load_config
from pi_notebook.tools.context.notebook_file import render_notebook
from pi_notebook.tools.context.project_files import ProjectFileError, read_project_file
from pi_notebook.tools.context.prompt_files import file_notes

AWS = "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY0\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(AWS)
    return secret


def _promptly(fn, timeout: float = 5.0):
    """``fn()`` in a thread; fails (instead of hanging the test run) when it blocks."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), "the read blocked"
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out.get("value")


def test_agents_md_link_out_of_the_project_is_not_sent(project: Path, outside: Path) -> None:
    (project / "AGENTS.md").symlink_to(outside)
    got = load_instructions(project)
    assert "wJalrXUtnFEMI" not in got.text and "aws_secret" not in got.text
    assert any("outside the project" in n for n in got.notices), got.notices


def test_agents_md_link_to_proc_is_not_sent(project: Path) -> None:
    os.environ["PI_TEST_DATABASE_URL"] = "postgresql://analyst:hunter2hunter2@db/x"
    try:
        (project / "AGENTS.md").symlink_to("/proc/self/environ")
        got = load_instructions(project)
    finally:
        del os.environ["PI_TEST_DATABASE_URL"]
    assert "analyst" not in got.text and "PI_TEST_DATABASE_URL" not in got.text
    assert got.notices and "system file" in got.notices[0]


def test_a_link_inside_the_project_is_read(project: Path) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "rules.md").write_text("Use polars.")
    (project / "AGENTS.md").symlink_to(project / "docs" / "rules.md")
    assert "Use polars." in load_instructions(project).text


def test_agents_md_fifo_returns_promptly(project: Path) -> None:
    os.mkfifo(project / "AGENTS.md")  # no writer: a blocking open() would never return
    got = _promptly(lambda: load_instructions(project))
    assert got.text == "" and "not a regular file" in got.notices[0]


def test_reader_refuses_a_fifo_promptly(project: Path) -> None:
    os.mkfifo(project / "pipe.txt")
    with pytest.raises(ProjectFileError, match="not a regular file"):
        _promptly(lambda: read_project_file(project / "pipe.txt", 100, project))


def test_big_utf8_cut_inside_a_character_is_still_text(project: Path) -> None:
    # 999,999 ASCII bytes, then a 3-byte character across the 1,000,000-byte bound
    (project / "AGENTS.md").write_bytes(b"a" * 999_999 + "€ and more".encode() * 10)
    got = load_instructions(project)
    assert got.text, got.notices
    assert not any("not UTF-8" in n for n in got.notices)
    read = read_project_file(project / "AGENTS.md", 1_000_000, project)
    assert read.cut and read.text == "a" * 999_999


def test_bytes_that_are_not_utf8_are_refused(project: Path) -> None:
    (project / "AGENTS.md").write_bytes(b"ok \xff\xfe here")
    assert any("not UTF-8" in n for n in load_instructions(project).notices)


def test_a_secret_in_a_project_file_is_redacted(project: Path) -> None:
    (project / "AGENTS.md").write_text("Deploy with " + AWS)
    text = load_instructions(project).text
    assert "Deploy with" in text and "wJalrXUtnFEMI" not in text


def test_mcp_config_link_out_of_the_project_is_not_used(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"mcpServers": {"evil": {"command": "evil-server"}}}))
    (project / ".pi_notebook").mkdir()
    (project / ".pi_notebook" / "mcp.json").symlink_to(elsewhere)
    got = load_config(project, environ={}, user_path=tmp_path / "none.json")
    assert "evil" not in got.servers
    assert any("outside the project" in n for n in got.notices), got.notices


def test_mcp_config_fifo_returns_promptly(project: Path, tmp_path: Path) -> None:
    explicit = project / "servers.json"
    os.mkfifo(explicit)
    got = _promptly(lambda: load_config(project, str(explicit), environ={}, user_path=tmp_path / "none.json"))
    assert not got.servers


def test_notebook_file_link_out_of_the_project_is_not_read(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "secret.ipynb"
    other.parent.mkdir()
    other.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": "private plan"}]}))
    (project / "analysis.ipynb").symlink_to(other)
    text = render_notebook(project / "analysis.ipynb")
    assert "private plan" not in text and "outside the project" in text


def test_notebook_file_fifo_returns_promptly(project: Path) -> None:
    os.mkfifo(project / "analysis.ipynb")
    text = _promptly(lambda: render_notebook(project / "analysis.ipynb"))
    assert "could not be read" in text


def test_prompt_file_link_out_of_the_project_shows_no_first_line(project: Path, outside: Path) -> None:
    (project / "keys.txt").symlink_to(outside)
    note = file_notes("look at keys.txt", cwd=project)
    assert note is not None and "[default]" not in note and "aws_secret" not in note

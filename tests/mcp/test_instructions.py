"""AGENTS.md files and AgentMagics.instructions for the system prompt."""

from __future__ import annotations

from pi_notebook.magics.instructions import load_instructions


def test_files_from_the_repo_root_to_the_notebook_nearest_last(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("root rule")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    (sub / "AGENTS.md").write_text("near rule")
    out = load_instructions(sub, "setting rule")
    assert out.text.index("root rule") < out.text.index("near rule") < out.text.index("setting rule")
    assert [f.path for f in out.files] == [tmp_path / "AGENTS.md", sub / "AGENTS.md"]
    assert out.notices == []
    lines = out.status_lines()
    assert str(sub / "AGENTS.md") in lines[1] and "B" in lines[1] and "AgentMagics.instructions" in lines[2]


def test_nothing_there_means_nothing_added(tmp_path):
    out = load_instructions(tmp_path)
    assert out.text == "" and out.files == [] and out.notices == []


def test_huge_unreadable_and_binary_files_are_one_line_notices(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("line\n" * 50_000)
    out = load_instructions(tmp_path, max_chars=2000)
    assert len(out.text) < 2600 and "cut" in out.text
    assert len(out.notices) == 1 and "\n" not in out.notices[0]
    (tmp_path / "AGENTS.md").write_bytes(b"\xff\xfe\x00bad")
    out = load_instructions(tmp_path)
    assert out.text == "" and "not UTF-8" in out.notices[0]


def test_dangling_link_is_a_notice(tmp_path):
    (tmp_path / "AGENTS.md").symlink_to(tmp_path / "gone.md")
    out = load_instructions(tmp_path)
    assert out.text == "" and len(out.notices) == 1 and "AGENTS.md" in out.notices[0]

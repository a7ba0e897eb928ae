"""Files a prompt names (tools/context/prompt_files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_notebook.tools.context.prompt_files import file_notes, named_paths


def test_paths_are_found_as_written() -> None:
    assert named_paths("load notebooks/data/sales.csv into df, then ~/x.parquet and ./a.json.") == [
        "notebooks/data/sales.csv", "~/x.parquet", "./a.json"]
    assert named_paths("the mean is 3.5, e.g. per region") == []


def test_notes_say_whether_each_file_exists_and_how_it_starts(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-live-" + "z" * 30)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sales.csv").write_text("month,region,revenue\n2025-01,north,1\n")
    (tmp_path / "keys.csv").write_text("name,value sk-live-" + "z" * 30 + "\n")
    notes = file_notes("load data/sales.csv and keys.csv and gone.csv", cwd=tmp_path)
    assert notes is not None
    lines = notes.splitlines()
    assert lines[0].startswith("File data/sales.csv exists (") and lines[0].endswith(
        "First line: month,region,revenue")
    assert "zzzzzzzz" not in lines[1]  # first lines are redacted like every other text
    assert lines[2].startswith("File gone.csv: not found")
    assert file_notes("no files here", cwd=tmp_path) is None

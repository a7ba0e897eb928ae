"""Which cells may run next to a waiting cell (magics/control_cells.py)."""

from __future__ import annotations

from pi_notebook.magics.control_cells import is_control_cell


def test_a_cell_wholly_of_control_lines_is_a_control_cell() -> None:
    for code in ("%agent status", "%agent abort\n", "  %steer wrap it up\n\n%followup then plot it",
                 "# stop it\n%agent reset", "%agent", "%steer\tnow"):
        assert is_control_cell(code), code


def test_anything_else_is_an_ordinary_cell() -> None:
    for code in ("%agent status\nx = 1", "%agentlog", "%agentlog status", "%steering x", "%%agent\nhi",
                 "x = 1\n%agent status", "", "   \n", "# only a comment",
                 "%followups"):
        assert not is_control_cell(code), code

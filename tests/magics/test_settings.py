"""What the python tool is told about the model it reports to (magics/settings.py)."""

from __future__ import annotations


def test_a_figure_is_attached_only_for_a_model_that_takes_images() -> None:
    from types import SimpleNamespace

    from pi_notebook.magics.config import AgentMagics
    from pi_notebook.magics.settings import python_tool_settings, update_python_tool_settings

    magics = AgentMagics()
    settings = python_tool_settings(magics)
    model = SimpleNamespace(input=["text"])
    update_python_tool_settings(settings, magics, lambda: model)
    assert settings.accepts_images() is False   # the embedded model: "not shown" instead
    model.input = ["text", "image"]             # read at each call: a switched model counts
    assert settings.accepts_images() is True
    update_python_tool_settings(settings, magics, lambda: None)
    assert settings.accepts_images() is True    # no model known: as before

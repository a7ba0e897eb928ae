"""Elicitation against the SDK test server's ``ask`` tool: a flat form is asked through the
callback and its checked values reach the server; anything else is declined with a notice;
the call's timeout does not run while the form is open; the widget form in the view."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from mcp_helpers import http_server, stdio_config

from pi_notebook.mcp.elicit import FormAnswer, UnsupportedForm, check_values, form_fields
from pi_notebook.mcp.config import ServerConfig
from pi_notebook.mcp.server import McpServer
from pi_notebook.widgets.view import AgentView

pytestmark = pytest.mark.timeout(180)

ORDER = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "title": "Name", "description": "<b>who</b>"},
    "quantity": {"type": "integer", "default": 1}, "price": {"type": "number"},
    "size": {"type": "string", "enum": ["small", "large"], "default": "small"},
    "express": {"type": "boolean", "default": False}}}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_NOTEBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_flat_schema_becomes_fields_and_anything_else_is_refused():
    fields = form_fields(ORDER)
    assert [(f.name, f.kind, f.required) for f in fields] == [
        ("name", "text", True), ("quantity", "integer", False), ("price", "number", False),
        ("size", "choice", False), ("express", "confirm", False)]
    assert fields[3].choices == ("small", "large")
    for bad in ({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
                {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}},
                {"type": "array"}, {"type": "object", "properties": {}}):
        with pytest.raises(UnsupportedForm):
            form_fields(bad)
    assert check_values(fields, {"name": "Ann", "quantity": "3", "price": "2.5", "size": "large"}) == {
        "name": "Ann", "quantity": 3, "price": 2.5, "size": "large", "express": False}
    for values, problem in (({}, "Name is required"), ({"name": "A", "quantity": "1.5"}, "whole number"),
                            ({"name": "A", "size": "huge"}, "choose one of"), ({"name": "A", "price": "x"}, "number")):
        with pytest.raises(ValueError, match=problem):
            check_values(fields, values)


async def test_the_server_gets_the_answer_and_the_timeout_waits_for_the_user(cache):
    asked = []

    async def answer(request):
        asked.append(request)
        await asyncio.sleep(2.5)  # longer than the call's timeout: the user is typing
        return FormAnswer("accept", {"name": "Ann", "quantity": 2, "size": "large", "express": True})

    server = McpServer(stdio_config(), on_elicit=answer)
    await server.start()
    try:
        result = await server.call("ask", {}, timeout_s=1)
        assert result.content[0].text.startswith("accepted ")
        assert json.loads(result.content[0].text.split(" ", 1)[1]) == {
            "name": "Ann", "quantity": 2, "price": 0.5, "size": "large", "express": True}
        assert asked[0].server == "t" and asked[0].message == "Which order should I place?"
        assert server.forms_open == 0
    finally:
        await server.stop()


async def test_decline_reaches_the_server_and_a_bad_answer_is_not_sent(cache):
    notices: list[str] = []
    answers = iter([FormAnswer("decline"), FormAnswer("accept", {"quantity": 2})])

    async def answer(request):
        return next(answers)

    server = McpServer(stdio_config(), on_elicit=answer, on_notice=notices.append)
    await server.start()
    try:
        assert (await server.call("ask", {}, timeout_s=30)).content[0].text == "decline"
        assert (await server.call("ask", {}, timeout_s=30)).content[0].text == "decline"  # name missing
        assert len(notices) == 1 and "was not sent" in notices[0] and "required" in notices[0]
    finally:
        await server.stop()


async def _both_styles_answered(config: ServerConfig) -> None:
    asked = []

    async def answer(request):
        asked.append(request.message)
        return FormAnswer("accept", {"name": f"Ann{len(asked)}"})

    server = McpServer(config, on_elicit=answer)
    await server.start()
    try:
        # ``ask`` uses Resolve(Elicit(...)); ``order`` awaits ctx.elicit() mid-call, a request
        # from the server that needs a connection with a way back to the client
        for tool, name in (("ask", "Ann1"), ("order", "Ann2")):
            result = await server.call(tool, {}, timeout_s=30)
            text = result.content[0].text
            assert not result.is_error and text.startswith("accepted "), (tool, text)
            assert json.loads(text.split(" ", 1)[1])["name"] == name
        assert asked == ["Which order should I place?"] * 2
    finally:
        await server.stop()


async def test_every_way_a_server_asks_gets_the_form_over_stdio(cache):
    await _both_styles_answered(stdio_config())


async def test_every_way_a_server_asks_gets_the_form_over_http(cache):
    with http_server() as url:
        await _both_styles_answered(ServerConfig(name="h", url=url, transport="http"))


def _click(button) -> None:
    thread = threading.Thread(target=button.click, name="subshell-test")  # as a subshell would
    thread.start()
    thread.join(5)


async def test_the_view_shows_a_form_checks_it_and_answers_from_a_click_on_another_thread():
    from pi_notebook.mcp.elicit import FormRequest

    view = AgentView("faux/test", asyncio.get_running_loop(), on_abort=lambda: None)
    try:
        request = FormRequest(server="wh", message="Pick <script>x</script>", fields=form_fields(ORDER))
        task = asyncio.ensure_future(view.request_input(request))
        await asyncio.sleep(0.05)
        (form, _), = view._forms.values()
        html = "\n".join(w.value for w in view._set if isinstance(getattr(w, "value", None), str)
                         and "<" in w.value)
        assert "Pick &lt;script&gt;" in html and "<script>" not in html and "&lt;b&gt;who" in html
        _click(form.buttons["submit"])  # the required name is empty
        await asyncio.sleep(0.2)
        assert not task.done() and "Name is required" in form.error.value
        form.controls["name"].value = "Ann"
        form.controls["quantity"].value = "4"
        form.controls["size"].value = "large"
        _click(form.buttons["submit"])
        action, values = await asyncio.wait_for(task, 2)
        assert action == "accept" and values == {"name": "Ann", "quantity": 4, "size": "large", "express": False}
        assert form.buttons["submit"].disabled and not view._forms_box.children

        task = asyncio.ensure_future(view.request_input(request))
        await asyncio.sleep(0.05)
        view.finish("aborted")  # the run ends: an open form is cancelled
        assert await asyncio.wait_for(task, 2) == ("cancel", None)
    finally:
        view.close()

"""A real MCP server for the tests, built with the SDK's own server API (``MCPServer``).

``python tests/mcp/server.py``                     stdio
``python tests/mcp/server.py http PORT``            streamable HTTP on 127.0.0.1:PORT/mcp
``python tests/mcp/server.py fail``                 writes to stderr and exits before speaking MCP
``python tests/mcp/server.py slow SECONDS``         stdio, after SECONDS of silence (a slow start)
``python tests/mcp/server.py stubborn``             stdio, but outlives the end of its stdin and
                                                    ignores SIGTERM (only SIGKILL ends it)

Tools: ``echo`` (text), ``image`` (a 2x2 PNG), ``table`` (structured content), ``env`` (the
value of one environment variable: the secret-leak canary), ``sleep`` (Abort and timeouts), ``work`` (progress),
``crash`` (the server process dies mid-call), ``pid`` (the server's process id), ``fails``
(an isError result), ``grow`` (adds a tool and sends tools/list_changed), ``peek``
(annotated read-only), ``drop`` (annotated destructive), ``ask`` (elicits a form from the
user: text, integer, number, choice, confirm; the ``Resolve(Elicit(...))`` style), ``order`` (the
same form asked with ``await ctx.elicit(...)``, the SDK's other style).
"""

from __future__ import annotations

import base64
import os
import sys
import time

from typing import Annotated, Literal

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp_types import ToolAnnotations
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel

PNG_2X2 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==")

server = MCPServer("pi-test")


class Row(BaseModel):
    region: str
    revenue: float


class Table(BaseModel):
    rows: list[Row]


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def image() -> Image:
    """A tiny PNG image."""
    return Image(data=PNG_2X2, format="png")


@server.tool()
def table(n: int = 3) -> Table:
    """Revenue by region, as structured content."""
    regions = ["north", "south", "east", "west"]
    return Table(rows=[Row(region=regions[i % 4], revenue=100.0 * (i + 1)) for i in range(n)])


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of the server process ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def work(steps: int, seconds: float, ctx: Context) -> str:
    """Works for steps x seconds, reporting progress after each step."""
    import anyio

    for i in range(steps):
        await anyio.sleep(seconds)
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"worked {steps} steps"


@server.tool()
def crash() -> str:
    """The server process dies in the middle of the call."""
    sys.stderr.write("test server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and tells the client that the tool list changed."""
    server.add_tool(lambda: "extra tool", name="extra", description="Added by grow.")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def fails() -> str:
    """Always fails (an isError result), ``grow`` (adds a tool and sends tools/list_changed)."""
    raise ValueError("this tool always fails")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def peek(key: str) -> str:
    """Reads a value (annotated read-only)."""
    return f"value of {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def drop(table: str) -> str:
    """Deletes a table (annotated destructive)."""
    return f"dropped {table}"


class Order(BaseModel):
    name: str
    quantity: int = 1
    price: float = 0.5
    size: Literal["small", "large"] = "small"
    express: bool = False


def _ask_order() -> Elicit[Order]:
    return Elicit("Which order should I place?", Order)


@server.tool()
def ask(answer: Annotated[ElicitationResult[Order], Resolve(_ask_order)]) -> str:
    """Asks the user for an order (elicitation), then says what came back."""
    if isinstance(answer, AcceptedElicitation):
        return "accepted " + answer.data.model_dump_json()
    return answer.action


@server.tool()
async def order(ctx: Context) -> str:
    """Asks the user for an order with ``ctx.elicit`` (mid-call), then says what came back."""
    answer = await ctx.elicit("Which order should I place?", Order)
    if isinstance(answer, AcceptedElicitation):
        return "accepted " + answer.data.model_dump_json()
    return answer.action


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "fail":
        sys.stderr.write("test server: cannot open the database 'warehouse.db'\n")
        sys.exit(2)
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        if mode == "slow":
            time.sleep(float(sys.argv[2]))
        server.run("stdio")
        if mode == "stubborn":  # a server that would be orphaned without PR_SET_PDEATHSIG
            import signal

            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)

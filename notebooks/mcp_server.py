"""A small MCP server for notebooks/mcp.ipynb: the orders of the sales data, by region.

Built with the official SDK's server API (``pip install "pi-notebook[mcp]"``). Run by the
notebook over stdio; try it alone with ``python mcp_server.py`` (it then waits for an MCP
client on stdin).
"""

from __future__ import annotations

import csv
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

DATA = Path(__file__).with_name("data") / "sales.csv"
server = MCPServer("warehouse", instructions="Sales orders of the example data set.")


class Order(BaseModel):
    month: str
    region: str
    units: int
    revenue: float


class Orders(BaseModel):
    orders: list[Order]


@server.tool()
def orders(region: str) -> Orders:
    """The monthly orders of one region ('north' or 'south'), oldest first."""
    with DATA.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["region"] == region]
    return Orders(orders=[Order(month=r["month"], region=r["region"], units=int(r["units"]),
                                revenue=float(r["revenue"])) for r in rows])


@server.tool()
def regions() -> list[str]:
    """The regions in the data."""
    with DATA.open(newline="") as f:
        return sorted({r["region"] for r in csv.DictReader(f)})


if __name__ == "__main__":
    server.run("stdio")

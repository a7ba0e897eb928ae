"""The live kernel served to outside agents as an MCP server (docs/design/serve.md).

``%agent serve`` (magics/serve_command.py) starts a :class:`~.server.KernelServer`: the
official SDK's streamable HTTP server on 127.0.0.1, on its own thread and event loop inside
the kernel process, behind a bearer token and a Host/Origin guard. Its tools are the agent's
own notebook tools; calls that touch the namespace take their turn on the kernel loop.
"""

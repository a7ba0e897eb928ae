"""The ASGI guard in front of the MCP app: who may talk to the served kernel at all.

Checked on every HTTP request, before the SDK sees it, in this order:

1. ``Host`` is ``127.0.0.1:<port>`` or ``localhost:<port>`` (421 otherwise): a page on a
   rebinding domain that resolves to 127.0.0.1 still sends its own name as Host;
2. ``Origin``, when present, is that same loopback origin (403 otherwise): a browser tab on
   any other site is refused even before the token is looked at. Command-line clients send
   no Origin;
3. ``Authorization: Bearer <token>`` matches, compared in constant time (401 otherwise).

Refusals carry a fixed text (never the presented header) and the guard logs nothing.
The token is read through a callable at each request, so ``rotate`` takes effect at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .secret import bearer_of, token_matches

__all__ = ["RequestGuard", "allowed_hosts"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


class RequestGuard:
    def __init__(self, app: ASGIApp, port: int, token: Callable[[], str],
                 on_refused: Callable[[str], None] | None = None) -> None:
        self.app = app
        self._hosts = allowed_hosts(port)
        self._origins = frozenset(f"http://{host}" for host in self._hosts)
        self._token = token
        self._on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":  # lifespan: the SDK's session manager starts there
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(_headers(scope))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, text = refusal
        if self._on_refused is not None:
            self._on_refused(text)
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), *extra]})
        await send({"type": "http.response.body", "body": text.encode()})

    def _refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        if headers.get("host", "").lower() not in self._hosts:
            return 421, "refused: the Host header is not this server's loopback address"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self._origins:
            return 403, "refused: requests from a web origin are not accepted"
        if not token_matches(bearer_of(headers.get("authorization")), self._token()):
            return 401, "refused: a valid bearer token is required"
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated header: its first value)."""
    found: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers") or ():
        name = bytes(raw_name).decode("latin-1").lower()
        found.setdefault(name, bytes(raw_value).decode("latin-1"))
    return found

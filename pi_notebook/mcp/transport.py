"""The bytes a server sends, turned into messages with a bound on each message's size.

Why our own stdio transport and not the SDK's ``stdio_client``: its reader joins the text it
holds with every chunk read and parses a message of any size, so the work grows with the square
of a message's size, on the kernel's loop: a 50 MB answer took 23 s of CPU in a bare process
and kept a kernel's run busy 65-78 s. Here:

* :class:`LineSplitter` looks for message ends in each chunk once and keeps an unfinished
  message in one ``bytearray``: its work is linear in the bytes read.
* A message longer than ``MAX_MESSAGE_BYTES`` is dropped as it streams: past the cap its bytes
  are counted, not kept, except its first and last few hundred bytes, which say what it
  answered. A reply dropped so is replaced by a JSON-RPC error for the same request id
  (:func:`too_large_reason`; :func:`reply_id` says which request), so the call waiting for it
  ends at once with that reason and the connection stays up. Any other oversized message (a
  request or notification from the server) is dropped, with a line in the server's log.
* The rest is what the SDK's stdio client does: the server starts in a session of its own (a
  process group, led by ``_die_with_kernel.py``), its stderr goes where asked (the redacted
  log), one JSON-RPC message per line each way, and the shutdown closes stdin, waits, then ends
  the process group, every wait bounded and shielded from the caller's cancellation.

Over streamable HTTP the same cap holds (``http_cap.py``): the SDK's per-event limit of an SSE
stream is set to it, and a response hook of the one HTTP client we pass the SDK caps any other
body.

Why 8 MB: what the model sees of a text is cut to ``max_output_chars`` anyway, so a longer text
buys nothing; the largest useful answers are images, base64 in the JSON (4/3 of their bytes),
and an image of 6 MB still fits. Parsing 8 MB takes about 25 ms, so a message under the cap
costs the loop little.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any

import anyio
import anyio.lowlevel
import mcp_types
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

__all__ = ["MAX_MESSAGE_BYTES", "LineSplitter", "Oversize", "reply_id", "too_large_reason", "is_too_large",
           "stdio_transport"]

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
_HEAD_BYTES = 512  # kept of a dropped message: where its id and kind usually are
_TAIL_BYTES = 256  # ... and where its id is when the server writes it last

# the SDK's shutdown figures: stdin closed, the server given time to exit, then its group ended
_WRITER_FLUSH_S = 0.5
_EXIT_WAIT_S = 2.0
_TERM_WAIT_S = 2.0
_REAP_WAIT_S = 2.0
_EXIT_POLL_S = 0.01


def too_large_reason(max_bytes: int) -> str:
    """What a call whose answer was over the cap gets (one sentence, no figure of the server's)."""
    return f"the server's reply was over {max_bytes / (1024 * 1024):g} MB and was dropped"


_TOO_LARGE = re.compile(r"the server's reply was over [\d.]+ MB and was dropped")
_SSE_LIMIT = re.compile(r"Server-sent event exceeded the (\d+) byte limit")


def is_too_large(text: str) -> str | None:
    """The reason, when an error's text says the answer was over the cap (ours on stdio and
    JSON bodies, the SDK's SSE limit on event streams); else None."""
    if (ours := _TOO_LARGE.search(text)) is not None:
        return ours.group(0)
    if (sse := _SSE_LIMIT.search(text)) is not None:
        return too_large_reason(int(sse.group(1)))
    return None


@dataclass
class Oversize:
    """A message over the cap, dropped: its size and the bytes kept of its two ends."""

    size: int
    head: bytes
    tail: bytes

    def add(self, piece: bytes | memoryview) -> None:
        self.size += len(piece)
        self.tail = (self.tail + bytes(piece[-_TAIL_BYTES:]))[-_TAIL_BYTES:]


class LineSplitter:
    """Newline-delimited messages out of chunks of bytes, each at most ``max_bytes`` long.

    ``feed`` returns the messages a chunk completes: ``bytes`` for one within the cap (the
    newline left off), :class:`Oversize` for one dropped. ``kept`` counts every byte copied
    into the buffer, which never holds more than the cap: a dropped message adds at most the
    cap to it, however long it was."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.kept = 0
        self._buffer = bytearray()
        self._dropping: Oversize | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversize]:
        out: list[bytes | Oversize] = []
        view = memoryview(chunk)
        position, length = 0, len(chunk)
        while position < length:
            newline = chunk.find(b"\n", position)
            end = length if newline < 0 else newline
            piece = view[position:end]
            if self._dropping is not None:
                self._dropping.add(piece)
            elif len(self._buffer) + len(piece) > self.max_bytes:
                head = bytes(self._buffer[:_HEAD_BYTES]) + bytes(piece[:_HEAD_BYTES])
                self._dropping = Oversize(len(self._buffer), head[:_HEAD_BYTES], bytes(self._buffer[-_TAIL_BYTES:]))
                self._dropping.add(piece)
                self._buffer = bytearray()
            elif newline < 0:
                self._buffer += piece
                self.kept += len(piece)
            elif self._buffer:
                self._buffer += piece
                self.kept += len(piece)
                out.append(bytes(self._buffer))
                self._buffer = bytearray()
            else:
                out.append(bytes(piece))
            if newline < 0:
                break
            if self._dropping is not None:
                out.append(self._dropping)
                self._dropping = None
            position = newline + 1
        return out


_DECODER = json.JSONDecoder()
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def _skip(text: str, at: int) -> int:
    """The position after JSON whitespace from ``at``."""
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _leading_members(head: str) -> dict[str, Any]:
    """The first top-level members of a JSON object whose text is cut short: a scalar value as
    read; a nested or cut value as ``...``, where reading stops."""
    members: dict[str, Any] = {}
    at = _skip(head, 0)
    if not head.startswith("{", at):
        return members
    at += 1
    while True:
        try:
            key, at = _DECODER.raw_decode(head, _skip(head, at))
            at = _skip(head, at)
        except ValueError:
            return members
        if not isinstance(key, str) or not head.startswith(":", at):
            return members
        at = _skip(head, at + 1)
        if head.startswith(("{", "["), at):
            members[key] = ...
            return members
        try:
            members[key], at = _DECODER.raw_decode(head, at)
        except ValueError:
            members[key] = ...
            return members
        at = _skip(head, at)
        if not head.startswith(",", at):
            return members
        at += 1


def reply_id(dropped: Oversize, waiting: Collection[int | str] = ()) -> int | str | None:
    """The request id a dropped message answered: the id its two ends name when they show a
    reply (a ``result`` or ``error`` member, no ``method``); when they name none and do not show
    a request or notification, the one request ``waiting`` for an answer, if there is exactly
    one (a server that buries the id mid-message still ends the call at once); else None."""
    members = _leading_members(dropped.head.decode("utf-8", "replace"))
    if "method" in members:
        return None
    found = members.get("id")
    if found is None or found is ...:
        match = _TAIL_ID.search(dropped.tail)
        found = json.loads(match.group(1)) if match else None
    if isinstance(found, (int, str)) and not isinstance(found, bool) and {"result", "error"} & members.keys():
        return found
    return next(iter(waiting)) if len(waiting) == 1 else None


def _parse(line: bytes, encoding: str, errors: str) -> SessionMessage | Exception:
    """A ``SessionMessage``, or the parse error as a value (the session surfaces it)."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line.decode(encoding, errors), by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


_REPLIES = (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)


def _track(message: mcp_types.JSONRPCMessage, waiting: set[int | str]) -> None:
    """Requests we send wait for an answer until one comes or we cancel them."""
    if isinstance(message, mcp_types.JSONRPCRequest):
        waiting.add(message.id)
    elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
        cancelled = (message.params or {}).get("requestId")
        if isinstance(cancelled, (int, str)):
            waiting.discard(cancelled)


def _dropped_reply(request_id: int | str, max_bytes: int) -> SessionMessage:
    error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=too_large_reason(max_bytes))
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _note(errlog: IO[str], text: str) -> None:
    with suppress(OSError, ValueError):
        errlog.write(f"pi_notebook: {text}\n")
        errlog.flush()


@asynccontextmanager
async def stdio_transport(command: str, args: list[str], *, env: Mapping[str, str], cwd: str | None,
                          errlog: IO[str], max_message_bytes: int | None = None,
                          encoding: str = "utf-8", errors: str = "replace") -> AsyncIterator[Any]:
    """Start the server and yield ``(read_stream, write_stream)`` as the SDK's ``Client``
    takes them (a transport): the read stream carries ``SessionMessage`` or ``Exception``
    items, the write stream takes ``SessionMessage``. Bounded as the module docstring says;
    ``max_message_bytes`` None: :data:`MAX_MESSAGE_BYTES` as it is when the server starts."""
    cap = MAX_MESSAGE_BYTES if max_message_bytes is None else max_message_bytes
    process = await anyio.open_process([command, *args], env={**get_default_environment(), **env},
                                       stderr=errlog, cwd=cwd, start_new_session=True)
    # no await between the start and the task group: a cancellation there would leak the process
    send_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, take_out = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stdout, stdin = process.stdout, process.stdin
    assert stdout is not None and stdin is not None  # opened with pipes (open_process's default)

    waiting: set[int | str] = set()  # ids of the requests sent and not answered yet

    async def deliver(item: bytes | Oversize) -> None:
        if isinstance(item, bytes):
            if item and not item.isspace():  # a blank line is no message (and not worth an error)
                parsed = _parse(item, encoding, errors)
                if isinstance(parsed, SessionMessage) and isinstance(parsed.message, _REPLIES):
                    waiting.discard(parsed.message.id)
                await send_in.send(parsed)
            return
        answered = reply_id(item, waiting)
        _note(errlog, f"dropped a message of {item.size} bytes from the server (the cap is {cap} bytes)")
        if answered is not None:
            waiting.discard(answered)
            await send_in.send(_dropped_reply(answered, cap))

    async def read() -> None:
        splitter = LineSplitter(cap)
        try:
            async with send_in:
                with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                              ConnectionError):
                    async for chunk in stdout:
                        for item in splitter.feed(chunk):
                            await deliver(item)
        finally:
            await _drain(stdout)

    async def write() -> None:
        try:
            async with take_out:
                async for session_message in take_out:
                    _track(session_message.message, waiting)
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((text + "\n").encode(encoding, errors))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await send_in.aclose()  # the server stopped reading: the session sees the end
        finally:
            writer_done.set()

    async def shut_down() -> None:
        read_stream.close()  # the reader goes on draining: a server blocked on stdout can exit
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_S):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, send_in, take_out):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the server must not outlive a cancelled caller
                await shut_down()
            tasks.cancel_scope.cancel()


async def _drain(stdout: Any) -> None:
    """Read and drop what the server still writes until its stdout closes (shielded)."""
    with anyio.CancelScope(shield=True), suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                                  anyio.BrokenResourceError, ConnectionError, OSError):
        while True:
            await stdout.receive()


async def _stop(process: Any) -> None:
    """Close stdin, give the server time to exit, then end its process group (SIGTERM, then
    SIGKILL), every wait bounded; close stdout last (a survivor may hold it open)."""
    await _close(process.stdin)
    if not await _exited(process, _EXIT_WAIT_S):
        await terminate_posix_process_tree(process, _TERM_WAIT_S)
        await _exited(process, _REAP_WAIT_S)
    await _close(process.stdout)
    # the asyncio transport stays open while a descendant holds a pipe: close it now, not at GC
    close = getattr(getattr(getattr(process, "_process", None), "_transport", None), "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _close(stream: Any) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


async def _exited(process: Any, timeout_s: float) -> bool:
    """Polls ``returncode`` (``wait()`` also waits for the pipes' end, which a child that
    inherited them holds open)."""
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(_EXIT_POLL_S)
        return True
    return False

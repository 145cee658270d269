"""Local HTTP servers that speak provider wire formats, for testing real SDK clients.

A :class:`WireServer` listens on 127.0.0.1 (a free port) in a background thread. Each test
scripts the replies it wants, in order (:meth:`WireServer.script`), points a real SDK client
at :attr:`WireServer.url`, and afterwards reads what the server received
(:attr:`WireServer.requests`). Replies are plain JSON, Server-Sent Event streams (which can
pause, run a callback, break off mid-stream or carry malformed data), or a dropped
connection. Nothing is random: the same script gives the same bytes.

The provider-specific payload builders live in ``openai_server`` and ``anthropic_server``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Call",
    "Drop",
    "JSONReply",
    "Pause",
    "Raw",
    "Received",
    "SSEReply",
    "TextReply",
    "WireServer",
    "serve",
    "sse",
]


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None when the body was not JSON
    raw: bytes


@dataclass(frozen=True)
class JSONReply:
    """A JSON answer with a status, sent after ``delay`` seconds."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class TextReply:
    """A non-JSON answer (an HTML error page from a proxy, say)."""

    text: str
    status: int = 200
    content_type: str = "text/html"


@dataclass(frozen=True)
class Pause:
    """Inside a stream: wait this many seconds before the next item."""

    seconds: float


@dataclass(frozen=True)
class Call:
    """Inside a stream: run a callback (for example, cancel a token) at this point."""

    fn: Callable[[], object]


@dataclass(frozen=True)
class Raw:
    """Inside a stream: bytes sent as they are (for malformed events)."""

    data: bytes


StreamItem = Any  # dict/str data event, (event_name, data) tuple, Pause, Call or Raw


@dataclass(frozen=True)
class SSEReply:
    """A ``text/event-stream`` answer, one HTTP chunk per item.

    Attributes:
        items: data events (a dict is sent as JSON, a str as is), ``(event, data)`` pairs
            for named events, or :class:`Pause`, :class:`Call`, :class:`Raw` steps.
        cut: close the connection after the items without ending the chunked body, as a
            server that dies mid-answer does.
        status: the HTTP status.
    """

    items: Sequence[StreamItem]
    cut: bool = False
    status: int = 200


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering."""


Reply = JSONReply | TextReply | SSEReply | Drop


def sse(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event, encoded."""
    body = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {body}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        owner = self.server.owner
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner._record(Received(self.command, self.path, headers, body, raw))
        reply = owner._next_reply()
        self.close_connection = True
        try:
            if isinstance(reply, Drop):
                self._drop()
            elif isinstance(reply, SSEReply):
                self._stream(reply)
            elif isinstance(reply, TextReply):
                self._text(reply)
            else:
                self._json(reply)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up (timeout, cancellation): that is the point of the test

    def _drop(self) -> None:
        self.connection.shutdown(socket.SHUT_RDWR)

    def _json(self, reply: JSONReply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        data = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _text(self, reply: TextReply) -> None:
        data = reply.text.encode()
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, reply: SSEReply) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.flush()
        for item in reply.items:
            if isinstance(item, Pause):
                time.sleep(item.seconds)
            elif isinstance(item, Call):
                item.fn()
            elif isinstance(item, Raw):
                self._chunk(item.data)
            elif isinstance(item, tuple):
                self._chunk(sse(item[1], item[0]))
            else:
                self._chunk(sse(item))
        if reply.cut:
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: WireServer


class WireServer:
    """A scripted HTTP server on 127.0.0.1 for one test module.

    Use as a context manager, :meth:`script` the replies before each call and read
    :attr:`requests` after. A request that finds no scripted reply gets HTTP 599, so a
    test that sends more requests than it expects fails loudly.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> WireServer:
        """Bind a free port and serve in a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Reply) -> None:
        """Replace the queue of replies; each request takes the next one."""
        with self._lock:
            self._replies = deque(replies)
            self.requests = []

    def reset(self) -> None:
        """Forget scripted replies and recorded requests."""
        self.script()

    @property
    def last(self) -> Received:
        """The most recent request."""
        assert self.requests, "the server received no request"
        return self.requests[-1]

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._replies)

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return JSONReply({"error": {"message": "no scripted reply", "type": "test"}}, status=599)


def serve() -> Iterator[WireServer]:
    """Body of a module-scoped fixture: one server for the module, reset by the tests."""
    with WireServer() as server:
        yield server

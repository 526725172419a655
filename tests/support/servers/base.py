"""A threaded loopback HTTP server with recorded requests and injectable faults."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    """What the server sends back."""

    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunks: Iterable[bytes] | None = None  # streamed as they are, e.g. server-sent events
    chunk_delay_s: float = 0.0  # a pause before each chunk: a slow stream


class _QuietOnHangUp(ThreadingHTTPServer):
    """A client that hangs up mid-connection (a reset, a closed pipe) is no server error.

    socketserver would print a traceback to stderr, which a test reading Ferry's stderr
    (an in-process CLI run captures it) would take for Ferry's own.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Serve `handle()` on a free 127.0.0.1 port; faults queued by `fail_next` win over it."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._faults: deque[Reply] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if len(body) < length:  # the client died mid-request: no server answers that
                    self.close_connection = True
                    return
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query={k: v[-1] for k, v in parse_qs(parts.query).items()},
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with server._lock:
                    server.requests.append(request)
                    fault = server._faults.popleft() if server._faults else None
                reply = fault or server.handle(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    server._send(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to do

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = _QuietOnHangUp(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def handle(self, request: Request) -> Reply:
        """Answer a request; subclasses route by path."""
        return Reply(404, {"error": f"no route for {request.path}"})

    def fail_next(self, reply: Reply, times: int = 1) -> None:
        """Answer the next `times` requests with `reply` instead of the normal answer."""
        with self._lock:
            self._faults.extend([reply] * times)

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path)]

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        headers = dict(reply.headers)
        if reply.chunks is not None:
            handler.send_response(reply.status)
            headers.setdefault("Content-Type", "text/event-stream")
            for k, v in headers.items():
                handler.send_header(k, v)
            handler.send_header("Connection", "close")
            handler.end_headers()
            for chunk in reply.chunks:
                if reply.chunk_delay_s:
                    time.sleep(reply.chunk_delay_s)
                handler.wfile.write(chunk)
                handler.wfile.flush()
            handler.close_connection = True
            return
        body = reply.body
        if isinstance(body, dict | list):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        handler.send_response(reply.status)
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on, for 'connection refused' tests."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"

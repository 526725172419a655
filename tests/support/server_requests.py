"""Requests a test sends to a running `langgraph dev`, and which of them the server served.

    attacks = [Attempt("text/plain POST /threads", "POST", "/threads", EVIL, body="{}")]
    assert not got_through(url, attacks, refusal=(403, "origin")), "these reached a handler"

An attempt "got through" unless the server answered with the expected refusal: its status
and a phrase of its message. A handler that happens to answer 403 itself still counts as
reached, so a test sees that the server's own gate refused it, before any handler ran.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.support.cli_helpers import ferry_env

STUDIO = "https://smith.langchain.com"
CHAT_UI = "http://localhost:3000"
EVIL = "https://evil.example"
QUESTION = {"messages": [{"role": "user", "content": "What is 2 + 2?"}]}
_WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455's sample key: any 16 bytes, base64
ALLOW_ORIGIN = "access-control-allow-origin"
ALLOW_PRIVATE_NETWORK = "access-control-allow-private-network"
_TIMEOUT_S = 60.0  # generous: the machine is shared, and nothing here waits on purpose


def server_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The server's environment: its own database, the offline model, no calls home."""
    return ferry_env(
        tmp_path,
        FERRY_MODEL="offline",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",  # no PyPI look-up at start-up
        **settings,
    )


@dataclass(frozen=True)
class Attempt:
    """One request: `path` and `body` may name `{thread_id}`; `websocket` sends a handshake."""

    name: str
    method: str
    path: str
    origin: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    websocket: bool = False


@dataclass(frozen=True)
class Reply:
    """What the server answered: status, headers (lower-case names) and body text."""

    status: int
    headers: dict[str, str]
    text: str


def send(url: str, attempt: Attempt, thread_id: str = "") -> Reply:
    """Send one attempt to the server at `url`."""
    headers = dict(attempt.headers)
    if attempt.origin is not None:
        headers["Origin"] = attempt.origin
    path = attempt.path.replace("{thread_id}", thread_id)
    if attempt.websocket:
        return handshake(url, path, headers)
    content = None if attempt.body is None else attempt.body.replace("{thread_id}", thread_id)
    reply = httpx.request(
        attempt.method, url + path, headers=headers, content=content, timeout=_TIMEOUT_S
    )
    return Reply(reply.status_code, {k.lower(): v for k, v in reply.headers.items()}, reply.text)


def handshake(url: str, path: str, headers: dict[str, str]) -> Reply:
    """Open a WebSocket the way a browser does (no CORS applies) and return the answer to it."""
    address = urlsplit(url)
    fields = {
        "Host": address.netloc,
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": _WS_KEY,
        "Sec-WebSocket-Version": "13",
    } | headers  # an attempt's own `Host` replaces the URL's
    lines = [f"GET {path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    with socket.create_connection((address.hostname, address.port), timeout=_TIMEOUT_S) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(4096)
            if not chunk:
                break
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        reply_headers = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in header_lines)
        )
        status = int(status_line.split()[1])
        if status != 101:  # a refusal's body, if it has one, follows its headers
            length = int(reply_headers.get("content-length", "0"))
            while len(rest) < length and (chunk := conn.recv(4096)):
                rest += chunk
    return Reply(status, reply_headers, rest.decode(errors="replace") if status != 101 else "")


def got_through(
    url: str, attempts: list[Attempt], refusal: tuple[int, str], thread_id: str = ""
) -> list[str]:
    """The attempts the server did not refuse with `refusal` (a status and a message phrase)."""
    status, phrase = refusal
    through = []
    for attempt in attempts:
        reply = send(url, attempt, thread_id)
        if reply.status != status or phrase not in reply.text:
            through.append(f"{attempt.name}: {reply.status} {reply.text[:120]!r}")
    return through


def replay_a_page(url: str, origin: str, *, public: bool, token: str | None = None) -> list[str]:
    """The requests Studio (`public`) or agent-chat-ui send for one question; what failed.

    Every request of a page is preceded by a preflight for it (JSON bodies, and a public
    page asks for private network access even for a GET). With `token`, each carries it.
    """
    failures: list[str] = []

    def call(method: str, path: str, body: object = None) -> httpx.Response | None:
        asked = preflight(url, path, origin, private_network=public)
        granted = asked.status == 200 and asked.headers.get(ALLOW_ORIGIN) == origin
        if public and asked.headers.get(ALLOW_PRIVATE_NETWORK) != "true":
            granted = False
        if not granted:
            failures.append(f"preflight {path}: {asked.status} {asked.headers}")
            return None
        content = None if body is None else json.dumps(body)
        headers = {"Origin": origin, "Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        reply = httpx.request(
            method, url + path, headers=headers, content=content, timeout=_TIMEOUT_S
        )
        if reply.status_code != 200 or reply.headers.get(ALLOW_ORIGIN) != origin:
            failures.append(f"{method} {path}: {reply.status_code} {reply.text[:200]!r}")
            return None
        return reply

    call("GET", "/info")
    call("POST", "/assistants/search", {"graph_id": "agent", "limit": 10})
    call("POST", "/threads/search", {"limit": 10})
    created = call("POST", "/threads", {})
    if created is None:
        return failures
    thread = created.json()["thread_id"]
    run = {"assistant_id": "agent", "input": QUESTION, "stream_mode": ["values", "messages-tuple"]}
    streamed = call("POST", f"/threads/{thread}/runs/stream", run)
    if streamed is not None and "event: values" not in streamed.text:
        failures.append(f"the run's stream has no values: {streamed.text[:300]!r}")
    state = call("GET", f"/threads/{thread}/state")
    if state is not None and state.json()["values"].get("stop_reason") != "answered":
        failures.append(f"the run did not answer: {state.text[:300]!r}")
    call("POST", f"/threads/{thread}/history", {"limit": 10})
    return failures


def preflight(url: str, path: str, origin: str, *, private_network: bool) -> Reply:
    """The OPTIONS a browser sends before a page's POST with a JSON body and a token."""
    headers = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    if private_network:  # a public page (Studio) calling 127.0.0.1
        headers["Access-Control-Request-Private-Network"] = "true"
    return send(url, Attempt(f"preflight {path}", "OPTIONS", path, origin, headers))

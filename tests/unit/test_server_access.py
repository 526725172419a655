"""`ServerAccess` in front of a stand-in server (the real one: tests/integration/test_server_*.py).

Each request is driven through the middleware as an ASGI server would; the stand-in records
whether it was reached, so a refusal is seen to come before any handler.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from graph.server.access import AccessPolicy, ServerAccess, host_name
from graph.server.security import server_hosts

STUDIO = "https://smith.langchain.com"
TOKEN = "s3cret-token-42"
ORIGINS = AccessPolicy(
    origins=frozenset({STUDIO}),
    origin_pattern=re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?$"),
)
WITH_TOKEN = AccessPolicy(ORIGINS.origins, ORIGINS.origin_pattern, token=TOKEN)
DENIAL = {"websocket.http.response": {}}


@dataclass
class Served:
    """What the middleware sent back, and whether the server behind it was reached."""

    reached: bool = False
    sent: list[Message] = field(default_factory=list)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def detail(self) -> str:
        body = b"".join(m.get("body", b"") for m in self.sent)
        return str(json.loads(body)["detail"])

    @property
    def headers(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.sent[0].get("headers", [])}


def request(
    policy: AccessPolicy,
    method: str = "GET",
    path: str = "/threads",
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    **extra: Any,
) -> Served:
    """Send one request through `ServerAccess(policy)`; Host is 127.0.0.1 unless given."""
    pairs = list((headers or {}).items()) if isinstance(headers, dict | None) else headers
    if not any(name.lower() == "host" for name, _ in pairs):
        pairs.append(("host", "127.0.0.1:2024"))
    served = Served()

    async def server(scope: Scope, receive: Receive, send: Send) -> None:
        served.reached = True
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def receive() -> Message:
        if extra.get("type") == "websocket":
            return {"type": "websocket.connect"}
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        served.sent.append(message)

    full: Scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in pairs],
    } | extra
    asyncio.run(ServerAccess(server, lambda: policy)(full, receive, send))
    return served


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://localhost.evil.example",
        f"{STUDIO}.evil.example",
        "http://localhost:3000/",
        "file://",
    ],
)
def test_a_page_of_another_origin_is_refused_whatever_the_method(method: str, origin: str) -> None:
    refused = request(ORIGINS, method, headers={"Origin": origin, "Content-Type": "text/plain"})
    assert not refused.reached and refused.status == 403
    assert origin in refused.detail and "http.cors" in refused.detail


@pytest.mark.parametrize(
    "origin", [STUDIO, "http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080"]
)
def test_studio_and_pages_on_localhost_are_served(origin: str) -> None:
    assert request(ORIGINS, "POST", headers={"Origin": origin}).reached


def test_no_origin_is_served_unless_the_browser_says_another_site_sent_it() -> None:
    assert request(ORIGINS, "POST").reached  # the CLI, the SDK, curl
    for site in ("none", "same-origin", "same-site"):
        assert request(ORIGINS, headers={"Sec-Fetch-Site": site}).reached, site
    refused = request(ORIGINS, headers={"Sec-Fetch-Site": "cross-site"})
    assert not refused.reached and refused.status == 403 and "cross-site" in refused.detail


def test_two_origins_are_refused() -> None:
    twice = [("Origin", STUDIO), ("Origin", "https://evil.example")]
    assert request(ORIGINS, headers=twice).status == 403


def test_any_origin_when_cors_allows_any_but_never_null() -> None:
    anyone = AccessPolicy(frozenset({"*"}))
    assert request(anyone, headers={"Origin": "https://elsewhere.example"}).reached
    assert request(anyone, headers={"Origin": "null"}).status == 403


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:2024",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "[::2]:2024",
        "localhost:2024:1",
        "",
        "user@localhost",
    ],
)
def test_another_host_name_is_refused(host: str) -> None:
    refused = request(ORIGINS, "POST", "/internal/truncate", {"Host": host})
    assert not refused.reached and refused.status == 400
    assert "FERRY_SERVER_HOSTS" in refused.detail


def test_two_host_headers_are_refused_and_the_health_check_answers_any() -> None:
    assert request(ORIGINS, headers=[("Host", "localhost"), ("Host", "evil.example")]).status == 400
    assert request(ORIGINS, path="/ok", headers={"Host": "10.0.0.7:8000"}).reached


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:2024", "localhost"),
        ("[::1]:2024", "[::1]"),
        ("[::1]", "[::1]"),
        ("127.0.0.1:", "127.0.0.1"),
        ("a:b:c", None),
        ("[::1", None),
    ],
)
def test_the_name_of_a_host_header(host: str, name: str | None) -> None:
    assert host_name(host) == name


def test_more_host_names_come_from_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert server_hosts() == {"localhost", "127.0.0.1", "[::1]"}
    monkeypatch.setenv("FERRY_SERVER_HOSTS", " Ferry.example, 192.168.1.20 ,,")
    hosts = server_hosts()
    assert hosts == {"localhost", "127.0.0.1", "[::1]", "ferry.example", "192.168.1.20"}
    named = AccessPolicy(ORIGINS.origins, hosts=hosts)
    assert request(named, headers={"Host": "FERRY.example:443"}).reached
    assert request(
        AccessPolicy(ORIGINS.origins, hosts=frozenset({"*"})), headers={"Host": "anything.example"}
    ).reached


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/deploy"),
        ("GET", "/deploy"),
        ("GET", "/deploy/op-1/stream"),
        ("POST", "/internal/truncate"),
        ("GET", "/internal/debug/thread/t-1"),
        ("GET", "/metrics"),
        ("GET", "/info"),
        ("GET", "/docs"),
        ("GET", "/openapi.json"),
        ("GET", "/"),
        ("GET", "/ui/agent/index.js"),
        ("OPTIONS", "/threads"),
        ("GET", "/ok/"),
    ],
)
def test_with_a_token_every_route_needs_it(method: str, path: str) -> None:
    refused = request(WITH_TOKEN, method, path)
    assert not refused.reached and refused.status == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert "access-control-allow-origin" not in refused.headers
    assert request(WITH_TOKEN, method, path, {"Authorization": f"Bearer {TOKEN}"}).reached
    twice = [("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer x")]
    assert request(WITH_TOKEN, method, path, twice).status == 401


TOKEN_ONLY = ["/deploy", "/deploy/", "/deploy/x", "/deploy/op-1/stream", "/internal/truncate"]
TOKEN_ONLY += ["/internal/debug/thread/t-1", "/internal/anything", "/internal"]


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
@pytest.mark.parametrize("path", TOKEN_ONLY)
def test_without_a_token_set_deploy_and_internal_are_refused(method: str, path: str) -> None:
    refused = request(ORIGINS, method, path)
    assert not refused.reached and refused.status == 403
    assert "set FERRY_SERVER_TOKEN" in refused.detail and "\n" not in refused.detail
    assert request(ORIGINS, method, path, {"Authorization": "Bearer guessed"}).status == 403
    # A page CORS allows (Studio, localhost) is refused too, and may read why.
    studio = request(ORIGINS, method, path, {"Origin": STUDIO})
    assert not studio.reached and studio.status == 403
    assert studio.headers["access-control-allow-origin"] == STUDIO


@pytest.mark.parametrize(
    "path",
    ["/threads", "/threads/search", "/assistants/search", "/info", "/docs", "/", "/ok"],
)
def test_without_a_token_set_the_other_routes_are_served(path: str) -> None:
    assert request(ORIGINS, "POST", path).reached
    assert request(ORIGINS, "GET", path, {"Origin": STUDIO}).reached


@pytest.mark.parametrize("path", TOKEN_ONLY)
def test_with_a_token_set_deploy_and_internal_are_served_with_it(path: str) -> None:
    refused = request(WITH_TOKEN, "POST", path)
    assert not refused.reached and refused.status == 401
    assert request(WITH_TOKEN, "POST", path, {"Authorization": "Bearer guessed"}).status == 401
    assert request(WITH_TOKEN, "POST", path, {"Authorization": f"Bearer {TOKEN}"}).reached


def test_a_mount_prefix_does_not_move_deploy_out_of_reach() -> None:
    mounted = request(ORIGINS, "POST", "/api/deploy", root_path="/api")
    assert not mounted.reached and mounted.status == 403
    assert request(ORIGINS, "POST", "/api/threads", root_path="/api").reached


def test_with_a_token_the_health_check_and_allowed_preflights_need_none() -> None:
    assert request(WITH_TOKEN, path="/ok").reached
    asks = {"Origin": STUDIO, "Access-Control-Request-Method": "POST"}
    assert request(WITH_TOKEN, "OPTIONS", "/threads/search", asks).reached
    foreign = request(WITH_TOKEN, "OPTIONS", "/threads", asks | {"Origin": "https://evil.example"})
    assert foreign.status == 403
    # Studio without the token may read why it is refused.
    refused = request(WITH_TOKEN, headers={"Origin": STUDIO})
    assert refused.status == 401 and refused.headers["access-control-allow-origin"] == STUDIO


def test_a_websocket_is_refused_with_an_http_answer_or_closed() -> None:
    evil = {"Origin": "https://evil.example"}
    answered = request(ORIGINS, headers=evil, type="websocket", extensions=DENIAL)
    assert not answered.reached
    assert answered.sent[0]["type"] == "websocket.http.response.start"
    assert answered.sent[0]["status"] == 403
    closed = request(WITH_TOKEN, type="websocket", extensions={})
    assert not closed.reached and closed.sent == [
        {
            "type": "websocket.close",
            "code": 1008,
            "reason": "send Authorization: Bearer <FERRY_SERVER_TOKEN>",
        }
    ]
    assert request(
        WITH_TOKEN, headers={"Authorization": f"Bearer {TOKEN}"}, type="websocket"
    ).reached


def test_the_servers_in_process_client_is_let_through() -> None:
    # LangGraph's own client (`get_client(url=None)`) calls the app with this root path.
    assert request(WITH_TOKEN, headers={"Host": "api"}, root_path="/noauth").reached
    assert request(WITH_TOKEN, headers={"Host": "api"}, root_path="/noauth/lgp").reached
    assert request(WITH_TOKEN, headers={"Host": "api"}, root_path="/noauthx").status == 400
    assert request(ORIGINS, "POST", headers={"Host": "api"}, root_path="/noauth").reached


@pytest.mark.parametrize("path", ["/deploy", "/deploy/x", "/internal/truncate"])
def test_the_in_process_client_needs_the_token_for_deploy_and_internal(path: str) -> None:
    # Nothing of Ferry's calls these in-process; a relative webhook URL would come this way.
    in_process = {"headers": {"Host": "api"}, "root_path": "/noauth"}
    unset = request(ORIGINS, "POST", path, **in_process)
    assert not unset.reached and unset.status == 403
    assert request(WITH_TOKEN, "POST", path, **in_process).status == 401
    bearer = {"Host": "api", "Authorization": f"Bearer {TOKEN}"}
    assert request(WITH_TOKEN, "POST", path, bearer, root_path="/noauth").reached

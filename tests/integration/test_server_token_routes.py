"""`langgraph dev` with `FERRY_SERVER_TOKEN` set: every route but `/ok` needs the token.

Not only the API (threads, runs, assistants), which LangGraph's authentication covers, but
everything else the server mounts: `/deploy` (it starts `langgraph deploy`), `/internal/*`,
`/metrics`, `/info`, `/docs`, `/openapi.json`, the UI files, WebSockets, unknown paths.
One server, with `FERRY_SERVER_HOSTS` naming one more host name.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.support.cli_helpers import Ferry, new_thread_id, succeeded
from tests.support.langgraph_dev import serving
from tests.support.server_requests import (
    ALLOW_ORIGIN,
    EVIL,
    QUESTION,
    STUDIO,
    Attempt,
    got_through,
    preflight,
    replay_a_page,
    send,
    server_env,
)

TOKEN = "test-server-token-5f2c9a"
BEARER = {"Authorization": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.timeout(300)

# Each without the token; /internal/truncate (it empties the server) comes last.
WITHOUT_THE_TOKEN = [
    Attempt("POST /threads/search", "POST", "/threads/search", body="{}"),
    Attempt("another token", "POST", "/threads/search", headers={"Authorization": "Bearer x"}),
    Attempt("no scheme", "POST", "/threads/search", headers={"Authorization": TOKEN}),
    Attempt("Basic", "POST", "/threads/search", headers={"Authorization": f"Basic {TOKEN}"}),
    # Studio's own header would skip custom auth on `langgraph dev`; here it does not.
    Attempt("x-auth-scheme", "POST", "/threads/search", headers={"x-auth-scheme": "langsmith"}),
    Attempt("GET a thread", "GET", "/threads/{thread_id}"),
    Attempt("DELETE a thread", "DELETE", "/threads/{thread_id}"),
    Attempt("GET /", "GET", "/"),
    Attempt("GET /info", "GET", "/info"),
    Attempt("GET /info from Studio", "GET", "/info", STUDIO),
    Attempt("GET /metrics", "GET", "/metrics"),
    Attempt("GET /docs", "GET", "/docs"),
    Attempt("GET /openapi.json", "GET", "/openapi.json"),
    Attempt("GET /deploy", "GET", "/deploy"),
    # From a page on [::1], which the server's own deploy check refuses: the test must not
    # start `langgraph deploy` should the request get through.
    Attempt("POST /deploy", "POST", "/deploy", "http://[::1]:5173", body="{}"),
    Attempt("GET a UI file", "GET", "/ui/agent/index.js"),
    Attempt("GET an unknown path", "GET", "/no-such-route"),
    Attempt("WebSocket", "GET", "/threads/{thread_id}/stream/events", websocket=True),
    Attempt("POST /internal/truncate", "POST", "/internal/truncate", body="{}"),
]


def test_every_route_but_the_health_check_needs_the_token(cli: Ferry, tmp_path: Path) -> None:
    env = server_env(
        tmp_path, FERRY_SERVER_TOKEN=TOKEN, FERRY_SERVER_HOSTS="ferry.test, Other.Test"
    )
    thread_id = new_thread_id(succeeded(cli("ask", "What is 2 + 2?", env=env, cwd=tmp_path)).stderr)

    with serving(tmp_path, env) as url:
        port = urlsplit(url).port or 80
        through = got_through(url, WITHOUT_THE_TOKEN, (401, "Authorization: Bearer"), thread_id)
        assert not through, (
            f"{len(through)} of {len(WITHOUT_THE_TOKEN)} requests without the token got through:\n"
            + "\n".join(through)
        )

        served = [
            Attempt("GET /ok", "GET", "/ok"),
            Attempt("GET /info", "GET", "/info", headers=BEARER),
            Attempt("GET /metrics", "GET", "/metrics", headers=BEARER),
            Attempt("GET /docs", "GET", "/docs", headers=BEARER),
            Attempt("GET /openapi.json", "GET", "/openapi.json", headers=BEARER),
            Attempt("GET a thread", "GET", "/threads/{thread_id}", headers=BEARER),
            Attempt(
                "a host of FERRY_SERVER_HOSTS",
                "GET",
                "/info",
                headers=BEARER | {"Host": f"ferry.test:{port}"},
            ),
            Attempt(
                "another, in capitals", "GET", "/info", headers=BEARER | {"Host": "OTHER.test"}
            ),
        ]
        failed = [
            f"{a.name}: {r.status} {r.text[:200]!r}"
            for a in served
            if (r := send(url, a, thread_id)).status != 200
        ]
        assert not failed, "\n".join(failed)

        # The token does not make another host name or another site's page welcome.
        other_host = send(
            url, Attempt("", "GET", "/info", headers=BEARER | {"Host": "evil.example"})
        )
        assert other_host.status == 400 and "FERRY_SERVER_HOSTS" in other_host.text
        other_site = send(url, Attempt("", "POST", "/threads", EVIL, BEARER, "{}"))
        assert other_site.status == 403, other_site
        # A browser's preflight carries no token: CORS answers it. Studio then sees the 401.
        assert preflight(url, "/info", STUDIO, private_network=True).headers[ALLOW_ORIGIN] == STUDIO
        assert send(url, Attempt("", "GET", "/info", STUDIO)).headers.get(ALLOW_ORIGIN) == STUDIO

        # The CLI's thread was registered by the in-process sync, which the token does not stop.
        listed = httpx.post(f"{url}/threads/search", json={}, headers=BEARER)
        assert [t["thread_id"] for t in listed.json()] == [thread_id]
        with get_sync_client(url=url, api_key=None, headers=BEARER) as client:
            values = client.runs.wait(thread_id, "agent", input=QUESTION)
        assert isinstance(values, dict) and values["stop_reason"] == "answered", values
        assert [m["type"] for m in values["messages"][-4:]] == ["human", "ai", "tool", "ai"]
        # Studio, given the token, works as without one.
        assert not replay_a_page(url, STUDIO, public=True, token=TOKEN)

"""`langgraph dev` as a user starts it (no token) serves this machine's user, not any web page.

A page on any site can send requests to 127.0.0.1: `text/plain` POSTs and WebSockets need no
CORS preflight, and a DNS-rebound name reaches the server as the page's own origin. CORS only
keeps the reply from the page; the server must refuse such requests before any handler runs.
One server: each attack below must be refused, and Studio and agent-chat-ui, replayed request
by request, must still be served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.langgraph_dev import serving
from tests.support.server_requests import (
    ALLOW_ORIGIN,
    ALLOW_PRIVATE_NETWORK,
    CHAT_UI,
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

TEXT = {"Content-Type": "text/plain"}  # a "simple" request: the browser sends it unasked
JSON = {"Content-Type": "application/json"}
RUN = json.dumps({"assistant_id": "agent", "input": QUESTION})

pytestmark = pytest.mark.timeout(300)

# Requests from pages the server does not serve; /internal/truncate (it empties the server
# when it gets through) comes last.
PAGE_ATTACKS = [
    Attempt("text/plain POST /threads", "POST", "/threads", EVIL, TEXT, "{}"),
    Attempt("text/plain POST a run", "POST", "/threads/{thread_id}/runs", EVIL, TEXT, RUN),
    Attempt("text/plain POST /threads/search", "POST", "/threads/search", EVIL, TEXT, "{}"),
    Attempt("GET a thread", "GET", "/threads/{thread_id}", EVIL),
    Attempt("PATCH a thread", "PATCH", "/threads/{thread_id}", EVIL, body='{"metadata": {}}'),
    Attempt("Origin: null (sandboxed iframe, file://)", "POST", "/threads", "null", TEXT, "{}"),
    Attempt("a look-alike of localhost", "POST", "/threads", "http://localhost.evil.example"),
    Attempt("a look-alike of Studio", "POST", "/threads", f"{STUDIO}.evil.example", TEXT, "{}"),
    Attempt(
        "no Origin, Sec-Fetch-Site: cross-site (an <img> or <script> of another site)",
        "GET",
        "/threads/{thread_id}/state",
        headers={"Sec-Fetch-Site": "cross-site"},
    ),
    Attempt(
        "WebSocket to a thread's events (no CORS for WebSockets)",
        "GET",
        "/threads/{thread_id}/stream/events",
        EVIL,
        websocket=True,
    ),
    Attempt("GET /deploy", "GET", "/deploy", EVIL),
    Attempt("GET /openapi.json", "GET", "/openapi.json", EVIL),
    Attempt("text/plain POST /internal/truncate", "POST", "/internal/truncate", EVIL, TEXT, "{}"),
]


# From this machine's programs and the pages the server serves: no token is set, so none of
# these routes is served. POST /deploy comes from a page on [::1], which the server's own
# deploy check refuses, so the test starts no `langgraph deploy` should it get through;
# /internal/truncate comes last.
TOKEN_ONLY_ROUTES = [
    Attempt("a program's GET /deploy", "GET", "/deploy"),
    Attempt("Studio's GET /deploy", "GET", "/deploy", STUDIO),
    Attempt("POST /deploy", "POST", "/deploy", "http://[::1]:5173", JSON, "{}"),
    Attempt("GET /deploy/<id>/stream", "GET", "/deploy/op-1/stream"),
    Attempt("GET /internal/debug/thread", "GET", "/internal/debug/thread/{thread_id}"),
    Attempt("a program's POST /internal/truncate", "POST", "/internal/truncate", body="{}"),
]


def rebinding_attacks(port: int) -> list[Attempt]:
    """A page at a name that resolves to 127.0.0.1 talks to the server as its own origin."""
    rebound = {"Host": f"evil.example:{port}"}
    page = f"http://evil.example:{port}"
    return [
        Attempt("GET /info", "GET", "/info", headers={"Host": "evil.example"}),
        Attempt("GET a thread", "GET", "/threads/{thread_id}", headers=rebound),
        Attempt("POST /threads, same origin", "POST", "/threads", page, rebound, "{}"),
        Attempt(
            "a name of 127.0.0.1",
            "POST",
            "/threads/search",
            headers={"Host": f"127.0.0.1.nip.io:{port}"},
            body="{}",
        ),
        Attempt("localhost look-alike", "GET", "/info", headers={"Host": "localhost.evil.example"}),
        Attempt(
            "WebSocket", "GET", "/threads/{thread_id}/stream/events", page, rebound, None, True
        ),
        Attempt("POST /internal/truncate", "POST", "/internal/truncate", page, rebound, "{}"),
    ]


@pytest.fixture(scope="module")
def url(module_path: Path) -> Iterator[str]:
    """The URL of `langgraph dev`, which the module's tests share: it takes seconds to start."""
    with serving(module_path, server_env(module_path)) as url:
        yield url


def test_pages_of_other_sites_and_other_host_names_are_refused_before_any_handler(
    url: str,
) -> None:
    port = urlsplit(url).port or 80
    thread_id = httpx.post(f"{url}/threads", json={}).json()["thread_id"]  # the CLI's, say

    from_pages = got_through(url, PAGE_ATTACKS, (403, "refused"), thread_id)
    from_rebound_names = got_through(
        url, rebinding_attacks(port), (400, "FERRY_SERVER_HOSTS"), thread_id
    )
    untokened = got_through(url, TOKEN_ONLY_ROUTES, (403, "FERRY_SERVER_TOKEN"), thread_id)
    assert not from_pages + from_rebound_names + untokened, (
        f"{len(from_pages)} of {len(PAGE_ATTACKS)} page attacks, "
        f"{len(from_rebound_names)} DNS-rebinding attacks and {len(untokened)} requests "
        "to token-only routes got through:\n"
        + "\n".join(from_pages + from_rebound_names + untokened)
    )
    assert httpx.get(f"{url}/threads/{thread_id}").status_code == 200  # nothing emptied it

    for origin in (EVIL, "null", "http://localhost.evil.example"):
        refused = preflight(url, "/threads/search", origin, private_network=True)
        assert refused.status in (400, 403), origin
        assert ALLOW_ORIGIN not in refused.headers, origin
        assert ALLOW_PRIVATE_NETWORK not in refused.headers, origin


def test_studio_agent_chat_ui_and_local_programs_are_served(url: str) -> None:
    port = urlsplit(url).port or 80
    # Programs send no Origin; the health check answers every Host (probes use the IP).
    local = [
        Attempt("SDK POST /threads", "POST", "/threads", body="{}"),
        Attempt("curl GET /info, Host localhost", "GET", "/info", headers={"Host": "localhost"}),
        Attempt("GET /info, Host [::1]", "GET", "/info", headers={"Host": f"[::1]:{port}"}),
        Attempt("GET /info, Host LOCALHOST", "GET", "/info", headers={"Host": "LOCALHOST"}),
        Attempt("GET /ok, any Host", "GET", "/ok", headers={"Host": "10.1.2.3:8000"}),
        Attempt(
            "the address bar (Sec-Fetch-Site: none)",
            "GET",
            "/docs",
            headers={"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"},
        ),
        Attempt(
            "a page on 127.0.0.1",
            "POST",
            "/threads/search",
            "http://127.0.0.1:5173",
            JSON,
            "{}",
        ),
        Attempt("a page on [::1]", "POST", "/threads/search", "http://[::1]:8080", JSON, "{}"),
        Attempt(
            "Studio's x-auth-scheme",
            "POST",
            "/threads/search",
            STUDIO,
            {"x-auth-scheme": "langsmith"} | JSON,
            "{}",
        ),
    ]
    failed = [
        f"{a.name}: {r.status} {r.text[:200]!r}" for a in local if (r := send(url, a)).status != 200
    ]
    failed += [f"Studio {f}" for f in replay_a_page(url, STUDIO, public=True)]
    failed += [f"agent-chat-ui {f}" for f in replay_a_page(url, CHAT_UI, public=False)]
    assert not failed, "\n".join(failed)

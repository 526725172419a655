"""`langgraph dev` on Ferry's `langgraph.json`: which web pages may use it, and its token.

Any page a user visits can send requests to 127.0.0.1; what CORS answers decides whether
the page may read the replies (and, for a public page, reach the machine at all). Two
servers: one as a user starts it, one with `FERRY_SERVER_TOKEN` set.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.support.cli_helpers import Ferry, ferry_env, new_thread_id, succeeded
from tests.support.langgraph_dev import serving

STUDIO = "https://smith.langchain.com"
LOCAL_PAGE = "http://localhost:3000"
FOREIGN = "https://evil.example"
TOKEN = "test-server-token-5f2c9a"
ALLOW_ORIGIN = "access-control-allow-origin"
ALLOW_PRIVATE_NETWORK = "access-control-allow-private-network"

pytestmark = pytest.mark.timeout(180)


def server_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The server's environment: its own database, the offline model, no calls home."""
    return ferry_env(
        tmp_path,
        FERRY_MODEL="offline",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",  # no PyPI look-up at start-up
        **settings,
    )


def preflight(url: str, origin: str) -> httpx.Response:
    """The OPTIONS a browser sends before a page's POST with a JSON body and a token."""
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
        "Access-Control-Request-Private-Network": "true",  # a public page calling 127.0.0.1
    }
    return httpx.options(f"{url}/threads/search", headers=headers)


def search(url: str, **headers: str) -> httpx.Response:
    """POST /threads/search, which lists every thread."""
    return httpx.post(f"{url}/threads/search", json={}, headers=headers)


def test_only_studio_and_localhost_pages_may_read_the_servers_replies(tmp_path: Path) -> None:
    with serving(tmp_path, server_env(tmp_path)) as url:
        thread_id = httpx.post(f"{url}/threads", json={}).json()["thread_id"]
        for origin in (FOREIGN, "http://localhost.evil.example", "null"):
            refused = preflight(url, origin)
            assert refused.status_code == 400, origin
            assert ALLOW_ORIGIN not in refused.headers, origin
            assert ALLOW_PRIVATE_NETWORK not in refused.headers, origin
            read = httpx.get(f"{url}/threads/{thread_id}", headers={"Origin": origin})
            listed = search(url, Origin=origin)
            # The server still answers (CORS is the browser's check), but tells the browser
            # to keep the reply from the page.
            assert (read.status_code, listed.status_code) == (200, 200), origin
            assert ALLOW_ORIGIN not in read.headers and ALLOW_ORIGIN not in listed.headers

        for origin in (STUDIO, LOCAL_PAGE, "http://127.0.0.1:5173"):
            allowed = preflight(url, origin)
            assert allowed.status_code == 200, (origin, allowed.text)
            assert allowed.headers[ALLOW_ORIGIN] == origin
            assert allowed.headers[ALLOW_PRIVATE_NETWORK] == "true"
            assert "authorization" in allowed.headers["access-control-allow-headers"]
            read = httpx.get(f"{url}/threads/{thread_id}", headers={"Origin": origin})
            assert read.headers[ALLOW_ORIGIN] == origin

        # Without a token every request is let in, Studio's (`x-auth-scheme`) as any other.
        assert [t["thread_id"] for t in search(url).json()] == [thread_id]
        assert search(url, **{"x-auth-scheme": "langsmith", "Origin": STUDIO}).status_code == 200


def test_with_a_server_token_every_request_must_carry_it(cli: Ferry, tmp_path: Path) -> None:
    env = server_env(tmp_path, FERRY_SERVER_TOKEN=TOKEN)
    asked = succeeded(cli("ask", "What is 2 + 2?", env=env, cwd=tmp_path))
    thread_id = new_thread_id(asked.stderr)

    with serving(tmp_path, env) as url:
        assert search(url).status_code == 401
        assert search(url, Authorization="Bearer not-the-token").status_code == 401
        assert search(url, Authorization=TOKEN).status_code == 401  # no scheme
        assert search(url, Authorization=f"Basic {TOKEN}").status_code == 401
        # Studio's own header would skip custom auth on `langgraph dev`; here it does not.
        assert search(url, **{"x-auth-scheme": "langsmith"}).status_code == 401
        assert httpx.get(f"{url}/threads/{thread_id}").status_code == 401
        assert httpx.delete(f"{url}/threads/{thread_id}").status_code == 401
        # A browser's preflight carries no token; CORS answers it before authentication.
        assert preflight(url, STUDIO).headers[ALLOW_ORIGIN] == STUDIO

        listed = search(url, Authorization=f"Bearer {TOKEN}")
        assert listed.status_code == 200
        # The CLI's thread was registered by the in-process sync, which the token does not stop.
        assert [t["thread_id"] for t in listed.json()] == [thread_id]
        question = {"messages": [{"role": "user", "content": "What is 3 * 3?"}]}
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        with get_sync_client(url=url, api_key=None, headers=bearer) as client:
            values = client.runs.wait(thread_id, "agent", input=question)
        assert isinstance(values, dict) and values["stop_reason"] == "answered", values
        assert [m["type"] for m in values["messages"][-4:]] == ["human", "ai", "tool", "ai"]

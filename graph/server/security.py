"""Who may use the LangGraph server: which web pages and host names, and, once a token is set, who.

`langgraph dev` listens on 127.0.0.1, but by default it answered every web page's requests,
so any site a user visited could list, read, run and delete every thread. `langgraph.json`
lets only Studio's origin and localhost pages read replies (`http.cors`) and serves `app`
below: `ServerAccess` (graph/server/access.py) in front of every route refuses other pages,
other host names and, with `FERRY_SERVER_TOKEN` set, requests without the token; then the
private network grant goes to the allowed origins alone. `auth` below, which `langgraph.json`
names too, checks the same token on LangGraph's own routes.
"""

from __future__ import annotations

import os
import re

from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph.core.settings import load_dotenv_file
from graph.server.access import (
    HOSTS_VARIABLE,
    LOCAL_HOSTS,
    TOKEN_VARIABLE,
    AccessPolicy,
    ServerAccess,
    bearer_token_matches,
)
from graph.server.commands import refuse_unsafe_commands
from graph.server.registry import lifespan
from tools.settings import default_user

_ALLOW_ORIGIN = "access-control-allow-origin"
_ALLOW_PRIVATE_NETWORK = "access-control-allow-private-network"
_REQUEST_PRIVATE_NETWORK = b"access-control-request-private-network"


def server_token() -> str | None:
    """Return the token the server requires (`FERRY_SERVER_TOKEN`, shell or `.env`), or None."""
    load_dotenv_file()
    return os.environ.get(TOKEN_VARIABLE) or None


def server_user() -> str:
    """Return who the server's clients act as: `FERRY_USER` (shell or `.env`), or the login."""
    load_dotenv_file()
    return os.environ.get("FERRY_USER", "").strip() or default_user()


def server_hosts() -> frozenset[str]:
    """Return the `Host` names served: localhost's and those of `FERRY_SERVER_HOSTS` (or `*`)."""
    load_dotenv_file()
    named = os.environ.get(HOSTS_VARIABLE, "").split(",")
    return LOCAL_HOSTS | {name.strip().lower() for name in named if name.strip()}


def server_policy() -> AccessPolicy:
    """Return whom the running server serves: its CORS origins, its host names and token."""
    # Only the server has this module (it reads the server's configuration when imported);
    # it has no type information.
    from langgraph_api import config  # type: ignore[import-untyped]

    # The origins CORS is given (langgraph.json's http.cors; without it LangGraph's default).
    cors = config.CORS_CONFIG or {"allow_origins": config.CORS_ALLOW_ORIGINS}
    pattern = cors.get("allow_origin_regex")
    return AccessPolicy(
        origins=frozenset(cors.get("allow_origins") or ()),
        origin_pattern=re.compile(pattern) if pattern else None,
        hosts=server_hosts(),
        token=server_token(),
    )


def make_auth(token: str | None, user: str) -> Auth:
    """Build the server's authentication: everyone in without a token, else only its holders.

    Args:
        token: The token requests must carry; None lets every request in (local use).
        user: Who they act as (`FERRY_USER`): whose memories a run reads and writes, the same
            as the CLI's on this machine.
    """
    server_auth = Auth()

    @server_auth.authenticate
    async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
        if token is not None and not bearer_token_matches(authorization, token):
            raise Auth.exceptions.HTTPException(
                status_code=401, detail=f"send Authorization: Bearer <{TOKEN_VARIABLE}>"
            )
        return {"identity": user}

    refuse_unsafe_commands(server_auth)  # graph/server/commands.py
    return server_auth


class PrivateNetworkForAllowedOrigins:
    """Grant private network access to the origins CORS allows, and only to them.

    A public page (Studio) may call a server on this machine only if the preflight grants both
    CORS and private network access. `langgraph dev` adds `Access-Control-Allow-Private-Network`
    to every preflight, whatever its origin, while the CORS middleware it configures refuses
    every preflight that asks for it. So the request's ask is hidden from CORS, and the grant is
    dropped from each response that CORS refused (no `Access-Control-Allow-Origin`).
    """

    def __init__(self, app: ASGIApp) -> None:
        """Wrap `app`.

        Args:
            app: The rest of the server.
        """
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, checking the headers of the response as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_checked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if _ALLOW_ORIGIN not in headers:
                    del headers[_ALLOW_PRIVATE_NETWORK]
            await send(message)

        unasked = [(k, v) for k, v in scope["headers"] if k != _REQUEST_PRIVATE_NETWORK]
        await self.app({**scope, "headers": unasked}, receive, send_checked)


auth = make_auth(server_token(), server_user())
"""What `langgraph.json`'s `auth.path` names; the token is read once, when the server starts."""

# User middleware wraps the server's own (langgraph.json's `http.middleware_order` left at its
# default), so ServerAccess runs before any of LangGraph's, and the private network check
# sees the header LangGraph adds.
app = Starlette(
    lifespan=lifespan,
    middleware=[
        Middleware(ServerAccess, policy=server_policy),
        Middleware(PrivateNetworkForAllowedOrigins),
    ],
)
"""What `langgraph.json`'s `http.app` names: Studio's thread sync (`graph.server.registry`)
behind the access rules and the private network check."""

"""Who may use the LangGraph server: which web pages (CORS) and, once a token is set, who.

`langgraph dev` listens on 127.0.0.1, but by default it answered every web page's requests
(CORS `*`), so any site a user visited could list, read, run and delete every thread.
`langgraph.json` now lets only Studio's origin and localhost pages in (`http.cors`), serves
`app` below, which keeps private network access for those origins alone, and names `auth`
below: with `FERRY_SERVER_TOKEN` set, every request must carry `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import hmac
import os

from langgraph_sdk import Auth
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph.server.registry import lifespan
from graph.settings import load_dotenv_file

TOKEN_VARIABLE = "FERRY_SERVER_TOKEN"
_ALLOW_ORIGIN = "access-control-allow-origin"
_ALLOW_PRIVATE_NETWORK = "access-control-allow-private-network"
_REQUEST_PRIVATE_NETWORK = b"access-control-request-private-network"


def server_token() -> str | None:
    """Return the token the server requires (`FERRY_SERVER_TOKEN`, shell or `.env`), or None."""
    load_dotenv_file()
    return os.environ.get(TOKEN_VARIABLE) or None


def bearer_token_matches(authorization: str | None, token: str) -> bool:
    """Whether an `Authorization` header value is `Bearer <token>`, compared in constant time.

    Args:
        authorization: The request's `Authorization` header, if it has one.
        token: The token the server requires.
    """
    scheme, _, given = (authorization or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def make_auth(token: str | None) -> Auth:
    """Build the server's authentication: everyone in without a token, else only its holders.

    Args:
        token: The token requests must carry; None lets every request in (local use).
    """
    server_auth = Auth()

    @server_auth.authenticate
    async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
        if token is None:
            return {"identity": "local-user"}
        if not bearer_token_matches(authorization, token):
            raise Auth.exceptions.HTTPException(
                status_code=401, detail=f"send Authorization: Bearer <{TOKEN_VARIABLE}>"
            )
        return {"identity": "token-holder"}

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


auth = make_auth(server_token())
"""What `langgraph.json`'s `auth.path` names; the token is read once, when the server starts."""

# User middleware wraps the server's own, so this sees the private network header it adds.
app = Starlette(lifespan=lifespan, middleware=[Middleware(PrivateNetworkForAllowedOrigins)])
"""What `langgraph.json`'s `http.app` names: Studio's thread sync (`graph.server.registry`)
behind the private network check."""

"""Which requests the server serves: this machine's user and the pages they trust, no others.

Every web page can send requests to 127.0.0.1. CORS only keeps the reply from a page; the
request itself still runs: `text/plain` POSTs and WebSockets need no preflight, and a page at
a name that resolves to 127.0.0.1 (DNS rebinding) even reads the replies, as its own origin.
`ServerAccess` wraps the whole server (LangGraph's routes, `/deploy`, `/internal/*`, `/docs`,
…) and refuses, before any handler runs:
- a `Host` other than localhost, 127.0.0.1, [::1] and the names the user adds (400);
- a page whose `Origin` CORS does not allow, `null` included, and a request the browser marks
  `Sec-Fetch-Site: cross-site` without an `Origin` (403);
- with a token set, a request without `Authorization: Bearer <token>` (401), on every route
  but the health check `/ok`, and but the CORS preflights of allowed pages (no browser sends
  a token in a preflight, and CORS answers them without a handler);
- on `/deploy*` and `/internal*` (they start `langgraph deploy`, empty the server), a request
  without the token from anyone, the server's own in-process client too; while no token is
  set, every request (403).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
HOSTS_VARIABLE = "FERRY_SERVER_HOSTS"
TOKEN_VARIABLE = "FERRY_SERVER_TOKEN"
HEALTH_CHECK = "/ok"
TOKEN_ONLY_ROUTES = ("/deploy", "/internal")
"""Path prefixes served only with the token, and never while none is set."""
# LangGraph's in-process client (`get_client(url=None)`) mounts the server at this root path;
# a root path comes from the ASGI server's configuration, never from a request.
IN_PROCESS_ROOT = "/noauth"
_TOKEN_ONLY_DETAIL = (
    f"/deploy and /internal/* are served only with a token: set {TOKEN_VARIABLE} when starting "
    "the server, then send Authorization: Bearer <token>"
)
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[^\[\]:]+)(:[0-9]*)?", re.IGNORECASE)


@dataclass(frozen=True)
class AccessPolicy:
    """Whom the server serves; read once, when it starts."""

    origins: frozenset[str]
    """Origins of the pages that may use it (`*`: any page): those CORS lets read replies."""
    origin_pattern: re.Pattern[str] | None = None
    """More origins: those matching this pattern in full, as CORS matches them."""
    hosts: frozenset[str] = LOCAL_HOSTS
    """`Host` names it answers, lower case, IPv6 addresses in brackets; `*`: any."""
    token: str | None = None
    """The token every request must carry; None: none needed."""

    def serves_origin(self, origin: str) -> bool:
        """Whether a page of `origin` may use the server; never one without an origin (`null`)."""
        if origin == "null":
            return False
        if "*" in self.origins or origin in self.origins:
            return True
        return self.origin_pattern is not None and bool(self.origin_pattern.fullmatch(origin))

    def serves_host(self, host: str) -> bool:
        """Whether a request with this `Host` header is answered."""
        return "*" in self.hosts or host_name(host) in self.hosts


def host_name(host: str) -> str | None:
    """The name in a `Host` header, lower case and without its port; None if malformed."""
    found = _HOST.fullmatch(host.strip())
    return found.group(1).lower() if found else None


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


@dataclass(frozen=True)
class Refusal:
    """Why a request is not served: an HTTP status and one sentence naming the rule."""

    status: int
    detail: str
    headers: dict[str, str] = field(default_factory=dict)


def refusal(policy: AccessPolicy, scope: Scope) -> Refusal | None:
    """Why the request of `scope` is refused, or None when it is served."""
    headers = Headers(scope=scope)
    if _in_process(scope):  # the server's own client: no Host or Origin to judge
        return _without_token(policy, scope, headers) if token_only(scope) else None
    return _stranger(policy, scope["path"], headers) or _without_token(policy, scope, headers)


def token_only(scope: Scope) -> bool:
    """Whether the request is for a route under `TOKEN_ONLY_ROUTES`.

    Both the path and the path the routes see (without a mount's root path) are judged, so a
    `mount_prefix` cannot move these routes out of reach of the rule.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    routed = path[len(root) :] if root and path.startswith(root + "/") else path
    return path.startswith(TOKEN_ONLY_ROUTES) or routed.startswith(TOKEN_ONLY_ROUTES)


def _stranger(policy: AccessPolicy, path: str, headers: Headers) -> Refusal | None:
    """Refuse another host name, and a page of an origin the server does not serve."""
    hosts = headers.getlist("host")
    # Probes address a container by its IP; the health check tells them nothing else.
    if path != HEALTH_CHECK and (len(hosts) != 1 or not policy.serves_host(hosts[0])):
        shown = ", ".join(hosts) or "none"
        return Refusal(
            400,
            f"Host {shown!r} is not served here: only localhost, 127.0.0.1, [::1] "
            f"and the names in {HOSTS_VARIABLE} are",
        )
    origins = headers.getlist("origin")
    if len(origins) > 1 or (origins and not policy.serves_origin(origins[0])):
        return Refusal(
            403,
            f"requests from pages at {', '.join(origins)!r} are refused: only the origins "
            "langgraph.json's http.cors allows (Studio, pages on localhost) may use this server",
        )
    # Only a page's GET (an <img>, a <script>, a link) comes without an Origin; the browser
    # still says where from.
    if not origins and headers.get("sec-fetch-site") == "cross-site":
        return Refusal(
            403,
            "cross-site requests without an Origin header are refused: "
            "open the server's pages from its own address",
        )
    return None


def _without_token(policy: AccessPolicy, scope: Scope, headers: Headers) -> Refusal | None:
    """Refuse a request without the token where one is needed.

    Once a token is set, on every route but `/ok`; while none is, on the token-only routes
    (deny by default: they act on the whole machine).
    """
    if scope["path"] == HEALTH_CHECK or (policy.token is None and not token_only(scope)):
        return None
    origin = headers.get("origin")
    if scope.get("method") == "OPTIONS" and origin and "access-control-request-method" in headers:
        return None  # an allowed page's preflight, which CORS answers without a handler
    # An allowed page may read the refusal, so Studio can say the token is missing.
    shown_to = {"access-control-allow-origin": origin, "vary": "Origin"} if origin else {}
    if policy.token is None:
        return Refusal(403, _TOKEN_ONLY_DETAIL, shown_to)
    given = headers.getlist("authorization")
    if len(given) == 1 and bearer_token_matches(given[0], policy.token):
        return None
    return Refusal(
        401,
        f"send Authorization: Bearer <{TOKEN_VARIABLE}>",
        {"www-authenticate": "Bearer"} | shown_to,
    )


class ServerAccess:
    """ASGI middleware in front of the whole server: serve a request or refuse it (`refusal`)."""

    def __init__(self, app: ASGIApp, policy: Callable[[], AccessPolicy]) -> None:
        """Wrap `app`; `policy` is called once, when the server builds its middleware.

        Args:
            app: The rest of the server.
            policy: Reads whom the server serves (settings, the server's CORS configuration).
        """
        self.app = app
        self.policy = policy()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request, or answer with its refusal without calling the rest."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = refusal(self.policy, scope)
        if refused is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http" or "websocket.http.response" in scope.get("extensions", {}):
            response = JSONResponse({"detail": refused.detail}, refused.status, refused.headers)
            await response(scope, receive, send)
        else:  # a server that cannot answer a WebSocket with HTTP: closing it answers 403
            await WebSocketClose(code=1008, reason=refused.detail[:120])(scope, receive, send)


def _in_process(scope: Scope) -> bool:
    root_path: str = scope.get("root_path", "")
    return root_path == IN_PROCESS_ROOT or root_path.startswith(IN_PROCESS_ROOT + "/")

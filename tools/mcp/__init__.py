"""MCP servers as Ferry tools, configured in a JSON file in the standard `mcpServers` shape.

    tools = mcp_tools()   # the servers' tools: from the listing cache, or listed by starting them
    for server in mcp_servers(): print(server.name, server.status, server.tools)  # starts them

A server whose listing is cached (tools/mcp/listing_cache.py) starts on the first call of one
of its tools; the others start at once, all together. Needs the extra `ferry-agent[mcp]`
(langchain-mcp-adapters and the MCP SDK), imported only when a server starts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tools.mcp.config import McpConfigError, config_file, read_config

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from tools.mcp.loader import ServerInfo

START_TIMEOUT_S = 30.0
"""How long a server may take to start and list its tools."""

__all__ = [
    "McpConfigError",
    "close_sessions",
    "config_file",
    "mcp_servers",
    "mcp_tools",
    "read_config",
]


def mcp_tools(
    path: Path | None = None,
    *,
    reserved: Iterable[str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
    refresh: bool = False,
) -> list[BaseTool]:
    """The configured servers' tools; a server that does not start is logged and left out.

    Args:
        path: The servers file; by default `FERRY_MCP_CONFIG`, else `./mcp.json` if present.
        reserved: Names taken already, by default the built-in tools' (`tools.TOOLS`): an MCP
            tool of one of these names, or of a name two servers share, is `<server>__<tool>`.
        start_timeout_s: How long a server may take to start.
        refresh: Start every server to list its tools, even those whose listing is cached.

    Raises:
        McpConfigError: the file cannot be used, or the `mcp` extra is not installed.
    """
    return _load(path, reserved, start_timeout_s, refresh)[0]


def mcp_servers(
    path: Path | None = None,
    *,
    reserved: Iterable[str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[ServerInfo]:
    """Each configured server: name, transport, status (and why it failed), its tools' names.

    Takes the same arguments as `mcp_tools`, and starts the servers this process has not
    started yet, whether their listing is cached or not: what it reports is live, and cached.

    Raises:
        McpConfigError: the file cannot be used, or the `mcp` extra is not installed.
    """
    return _load(path, reserved, start_timeout_s, refresh=True)[1]


def close_sessions() -> None:
    """Close every MCP session now (they close at exit anyway); later calls start them again."""
    if "tools.mcp.sessions" in sys.modules:  # nothing was ever opened otherwise
        from tools.mcp.sessions import close_all

        close_all()


def _load(
    path: Path | None, reserved: Iterable[str] | None, start_timeout_s: float, refresh: bool
) -> tuple[list[BaseTool], list[ServerInfo]]:
    if reserved is None:
        from tools import TOOLS

        reserved = [t.name for t in TOOLS]
    # Read once, a folder's mcp.json only once trusted (before any cache use); every later
    # step uses these bytes, never the file again.
    found = config_file(path)
    if found is None:
        return [], []
    specs = read_config(found)
    if not specs:
        return [], []
    from tools.mcp.lazy import McpServer
    from tools.mcp.listing import fingerprint
    from tools.mcp.listing_cache import cached_listing
    from tools.mcp.loader import build_tools

    prints = {spec.key: fingerprint(spec, found.path) for spec in specs}
    running = sys.modules.get("tools.mcp.sessions")  # imported once a server started
    servers: dict[str, McpServer] = {}
    for spec in specs:
        live = running.started(spec) if running is not None else None
        listing = None if refresh or live or spec.problem else cached_listing(prints[spec.key])
        if live is not None:
            servers[spec.key] = McpServer.running(live, prints[spec.key])
        elif listing is not None:
            servers[spec.key] = McpServer.listed(spec, prints[spec.key], listing)
    unlisted = [spec for spec in specs if spec.key not in servers]
    if unlisted:
        try:
            from tools.mcp import sessions
        except ImportError as exc:
            raise McpConfigError(
                f"{found.path}: MCP servers need the extra: pip install 'ferry-agent[mcp]' ({exc})"
            ) from exc
        for server in sessions.connect(unlisted, start_timeout_s, prints):  # all at once
            servers[server.spec.key] = McpServer.running(server, prints[server.spec.key])
    config = f"{found.path.resolve()} {found.sha256}"
    return build_tools([servers[s.key] for s in specs], reserved, start_timeout_s, config)

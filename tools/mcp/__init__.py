"""MCP servers as Ferry tools, configured in a JSON file in the standard `mcpServers` shape.

    tools = mcp_tools()   # the servers' tools; starts each server once per process
    for server in mcp_servers(): print(server.name, server.status, server.tools)

Needs the extra `ferry-agent[mcp]` (langchain-mcp-adapters and the MCP SDK), imported only when
a servers file is configured.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tools.mcp.config import McpConfigError, config_path, read_config
from tools.mcp.secrets import config_secrets

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from tools.mcp.loader import ServerInfo

START_TIMEOUT_S = 30.0
"""How long a server may take to start and list its tools."""

__all__ = [
    "McpConfigError",
    "close_sessions",
    "config_path",
    "config_secrets",
    "mcp_servers",
    "mcp_tools",
    "read_config",
]


def mcp_tools(
    path: Path | None = None,
    *,
    reserved: Iterable[str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[BaseTool]:
    """The configured servers' tools; a server that does not start is logged and left out.

    Args:
        path: The servers file; by default `FERRY_MCP_CONFIG`, else `./mcp.json` if present.
        reserved: Names taken already, by default the built-in tools' (`tools.TOOLS`): an MCP
            tool of one of these names, or of a name two servers share, is `<server>__<tool>`.
        start_timeout_s: How long a server may take to start.

    Raises:
        McpConfigError: the file cannot be used, or the `mcp` extra is not installed.
    """
    return _load(path, reserved, start_timeout_s)[0]


def mcp_servers(
    path: Path | None = None,
    *,
    reserved: Iterable[str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[ServerInfo]:
    """Each configured server: name, transport, status (and why it failed), its tools' names.

    Takes the same arguments as `mcp_tools`, and starts the servers it has not started yet.

    Raises:
        McpConfigError: the file cannot be used, or the `mcp` extra is not installed.
    """
    return _load(path, reserved, start_timeout_s)[1]


def close_sessions() -> None:
    """Close every MCP session now (they close at exit anyway); later loads start them again."""
    import sys

    if "tools.mcp.sessions" in sys.modules:  # nothing was ever opened otherwise
        from tools.mcp.sessions import close_all

        close_all()


def _load(
    path: Path | None, reserved: Iterable[str] | None, start_timeout_s: float
) -> tuple[list[BaseTool], list[ServerInfo]]:
    if reserved is None:
        from tools import TOOLS

        reserved = [t.name for t in TOOLS]
    found = config_path(path)
    if found is None:
        return [], []
    specs = read_config(found)
    if not specs:
        return [], []
    try:
        from tools.mcp import sessions
        from tools.mcp.loader import build_tools
    except ImportError as exc:
        raise McpConfigError(
            f"{found}: MCP servers need the extra: pip install 'ferry-agent[mcp]' ({exc})"
        ) from exc
    servers = sessions.connect(specs, start_timeout_s)
    return build_tools(servers, reserved, start_timeout_s)

"""A configured MCP server as its tools see it: running, or listed from the cache.

A server offered from its cached listing is started by the first call of one of its tools.

A run that offers only cached listings imports neither the MCP SDK nor the adapters: the first
call imports them and starts the server (tools/mcp/sessions.py). The server's live listing is
then cached in place of the old one, and a call of a tool that the server no longer offers, or
whose arguments or annotations changed, is answered with an error saying so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.tools import ToolException

from tools.mcp.config import ServerSpec
from tools.mcp.listing import ListedTool, listed_tool

if TYPE_CHECKING:
    from tools.mcp import sessions

_MAX_SCHEMA_CHARS = 2000
"""How much of a changed tool's new argument schema an error quotes."""


@dataclass
class McpServer:
    """One configured server: its tools as offered to the model, and how it is doing."""

    spec: ServerSpec
    fingerprint: str | None
    """Where its listing is cached; None when it is not."""
    status: str
    """`connected`, `listed` (from the cache; starts on the first call), `failed`, `stopped`."""
    reason: str
    """Why it failed or stopped; empty otherwise."""
    tools: list[ListedTool]
    """Its tools as the model is told of them."""
    on_change: dict[str, Callable[[ListedTool], None]] = field(default_factory=dict)
    """Per tool: what to update when the server's live listing of it differs (its metadata)."""

    @classmethod
    def running(cls, server: sessions.Server, fingerprint: str | None) -> McpServer:
        """A server this process started (or tried to): its live listing if it is connected."""
        live = server.status == "connected"
        tools = [listed_tool(t) for t in server.tools] if live else []
        return cls(server.spec, fingerprint, server.status, server.reason, tools)

    @classmethod
    def listed(cls, spec: ServerSpec, fingerprint: str, tools: list[ListedTool]) -> McpServer:
        """A server not started, offered from the listing cached under `fingerprint`."""
        return cls(spec, fingerprint, "listed", "", tools)

    async def call(self, tool: str, arguments: dict[str, Any], start_timeout_s: float) -> Any:
        """Call one of its tools, starting the server first if it is not running.

        A start outlives a call that gave up on it (its timeout, a cancelled run): the next
        call finds the server started instead of starting it over.

        Raises:
            ToolException: the server did not start, or changed the tool, or the call failed,
                in words the model can act on.
        """
        session = _session(self.spec, self.fingerprint)
        starting = asyncio.ensure_future(session.ready(start_timeout_s))
        starting.add_done_callback(_seen)
        await asyncio.shield(starting)
        self._check_unchanged(session, tool)
        return await session.call(tool, arguments, start_timeout_s)

    def _check_unchanged(self, session: sessions.Server, tool: str) -> None:
        """Refuse a call of a tool the model was told of in a way its server no longer has."""
        offered = next((t for t in self.tools if t.name == tool), None)
        live = next((listed_tool(t) for t in session.tools if t.name == tool), None)
        name = self.spec.name
        if live is None:
            raise ToolException(
                f"MCP server '{name}' no longer offers the tool '{tool}' (Ferry's list of its "
                "tools was older than the server; the next run offers its current tools)."
            )
        same = offered is not None and (offered.input_schema, offered.annotations) == (
            live.input_schema,
            live.annotations,
        )
        if same or tool in session.told_changed:
            return
        session.told_changed.add(tool)  # said once: a call made knowing the change goes ahead
        if tool in self.on_change:
            self.on_change[tool](live)  # the guards judge the next call by what it is now
        schema = json.dumps(live.input_schema, ensure_ascii=False, sort_keys=True)
        if len(schema) > _MAX_SCHEMA_CHARS:
            schema = schema[:_MAX_SCHEMA_CHARS] + " …"
        raise ToolException(
            f"MCP server '{name}' changed the tool '{tool}' since Ferry listed it, so this call "
            f"was not run. Its arguments are now: {schema}. Call it again with arguments "
            "that fit."
        )


def _session(spec: ServerSpec, fingerprint: str | None) -> sessions.Server:
    try:
        from tools.mcp import sessions
    except ImportError as exc:  # a listing cached before the extra was uninstalled
        raise ToolException(
            f"MCP server '{spec.name}' needs the extra: pip install 'ferry-agent[mcp]' ({exc})"
        ) from exc
    return sessions.server_for(spec, fingerprint)


def _seen(task: asyncio.Future[None]) -> None:
    """Retrieve a start's outcome, so one no call waits for any more is not logged as lost."""
    if not task.cancelled():
        task.exception()

"""MCP sessions: one per server, opened once per process at most, on the MCP loop (loop.py).

Each session lives in a task that owns it from start to close (anyio's scopes must be left in
the task that entered them). A session that goes away during a call is reopened by the next
call; all of them close when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import IO, Any, Literal

from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tools.mcp.config import ServerSpec
from tools.mcp.failures import SessionLost, explain, result_of
from tools.mcp.listing import listed_tool
from tools.mcp.listing_cache import forget_listing, remember_listing
from tools.mcp.loop import run, stop_loop

Status = Literal["new", "connected", "stopped", "failed"]
"""`stopped`: went away during a call, restarted by the next; `failed`: not restarted."""
CLOSE_TIMEOUT_S = 10.0
# The SDKs log their own tracebacks (a line that is not JSON, a dropped connection); Ferry says
# what happened in one line instead. An application that configures logging still gets them.
for _name in ("mcp", "langchain_mcp_adapters"):
    logging.getLogger(_name).addHandler(logging.NullHandler())

log = logging.getLogger("ferry.mcp")
_lock = threading.Lock()
_starting = threading.Lock()
_servers: dict[str, Server] = {}
_exit_handled = False  # whether the sessions are closed at exit


def connect(
    specs: Sequence[ServerSpec], start_timeout_s: float, fingerprints: dict[str, str] | None = None
) -> list[Server]:
    """Each spec's server: started now (all at once) unless this process started it already.

    `fingerprints` (spec key → fingerprint): where the listing of a server started is cached.
    """
    with _starting:  # two threads building graphs at once start each server once
        servers = [server_for(spec, (fingerprints or {}).get(spec.key)) for spec in specs]
        fresh = [server for server in servers if server.status == "new"]
        if fresh:
            with suppress(TimeoutError):  # each `open` has its own bound; this one is a backstop
                run(_open_all(fresh, start_timeout_s), start_timeout_s + 2 * CLOSE_TIMEOUT_S)
            for server in fresh:
                if server.status == "new":
                    server.status, server.reason = "failed", "did not start in time"
    return servers


def server_for(spec: ServerSpec, fingerprint: str | None = None) -> Server:
    """This process's server of `spec`, not started if it is new (`Server.ready` starts it)."""
    global _exit_handled
    with _lock:
        if not _exit_handled:
            atexit.register(_shut_down)
            _exit_handled = True
        server = _servers.setdefault(spec.key, Server(spec))
        server.fingerprint = fingerprint or server.fingerprint
        return server


def started(spec: ServerSpec) -> Server | None:
    """This process's server of `spec` if it is running (its listing is live), else None."""
    with _lock:
        server = _servers.get(spec.key)
    return server if server is not None and server.status == "connected" else None


async def _open_all(servers: list[Server], start_timeout_s: float) -> None:
    await asyncio.gather(*(server.open(start_timeout_s) for server in servers))


def close_all() -> None:
    """Close every session (stdio servers exit); the next `connect` starts them again."""
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    if servers:
        with suppress(TimeoutError):
            run(_close(servers), CLOSE_TIMEOUT_S)


async def _close(servers: list[Server]) -> None:
    await asyncio.gather(*(server.close() for server in servers), return_exceptions=True)


def _shut_down() -> None:
    close_all()
    stop_loop()


class Server:
    """One server's session, opened on the MCP loop; after it stops, the next call reopens it."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.status: Status = "new"
        self.reason = ""
        """Why the server failed or stopped."""
        self.tools: list[BaseTool] = []
        """The adapters' tools, bound to the current session."""
        self.fingerprint: str | None = None
        """Where its listing is cached (tools/mcp/listing_cache.py), if it is."""
        self.told_changed: set[str] = set()
        """Its tools whose change since the cached listing a call was answered with already."""
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._reopen = asyncio.Lock()
        self._stderr: IO[str] | None = None

    async def open(self, start_timeout_s: float) -> bool:
        """Start the server and list its tools; on failure, `status` "failed" and the reason."""
        if self.spec.problem:
            self.status, self.reason = "failed", self.spec.problem
            self._warn_failed()
            return False
        ready = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        if self.spec.transport == "stdio":
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp:{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), start_timeout_s)
        except asyncio.CancelledError:  # the caller gave up (Ctrl-C, its time budget): not started
            await self._end(cancel=True)
            raise
        except TimeoutError:
            await self._end(cancel=True)
            self.status, self.reason = "failed", f"no answer within {start_timeout_s:g} s"
        except Exception as exc:  # noqa: BLE001 - any start failure is the server's, told in one line
            self.status, self.reason = "failed", self._reason(exc)
            await self._end()
        else:
            self.status, self.reason = "connected", ""
            extra = {"event": "mcp_server_started", "ferry_server": self.spec.name}
            log.info(f"MCP server '{self.spec.name}' started ({self.spec.transport})", extra=extra)
            if self.fingerprint:  # what it lists now is what the next runs offer
                remember_listing(self.fingerprint, self.spec.name, map(listed_tool, self.tools))
            return True
        if self.fingerprint:  # the next run starts it again to list its tools, and says why not
            forget_listing(self.fingerprint)
        self._warn_failed()
        return False

    def _warn_failed(self) -> None:
        extra = {"event": "mcp_server_failed", "ferry_server": self.spec.name}
        log.warning(f"MCP server '{self.spec.name}' did not start: {self.reason}", extra=extra)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Hold the session open, in this one task, until `close` (or the server goes away)."""
        try:
            async with self._session() as session:
                self.tools = await load_mcp_tools(session, server_name=self.spec.name)
                ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif self.status == "connected":
                self.status, self.reason = "stopped", self._reason(exc)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[ClientSession]:
        spec = self.spec
        if spec.transport != "stdio":
            async with MultiServerMCPClient({spec.name: spec.connection}).session(spec.name) as s:  # type: ignore[dict-item]  # ServerSpec.connection is the adapters' Connection, built in config.py
                yield s
            return
        c = spec.connection
        params = StdioServerParameters(
            command=c["command"], args=c["args"], env=c["env"], cwd=c["cwd"]
        )
        # The server's stderr goes to a file: its last line explains a failed start.
        async with stdio_client(params, errlog=self._stderr) as (read, write):  # type: ignore[arg-type]  # set by `open`
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session

    async def call(self, tool: str, arguments: dict[str, Any], start_timeout_s: float) -> Any:
        """Call one of the server's tools: the adapters' `(content, artifact)`.

        Raises:
            ToolException: in words the model can act on, naming the server.
        """
        name = self.spec.name
        await self.ready(start_timeout_s)
        adapter_tool = next((t for t in self.tools if t.name == tool), None)
        coroutine = getattr(adapter_tool, "coroutine", None)
        if coroutine is None:
            raise ToolException(f"MCP server '{name}' no longer offers the tool '{tool}'.")
        owner = self._owner  # this session's; a call that failed on it must not end the next
        task = asyncio.ensure_future(coroutine(**arguments))
        try:
            await asyncio.wait({task, *([owner] if owner else [])}, return_when="FIRST_COMPLETED")
        finally:
            if not task.done():
                task.cancel()
        try:
            if not task.done() or task.cancelled():
                raise SessionLost(self.reason or "its session ended")
            return result_of(task, name, self._reason)
        except SessionLost as lost:
            if self._owner is owner:
                self.status, self.reason = "stopped", str(lost)
                await self._end()
            raise ToolException(f"MCP server '{name}' stopped: {lost}") from None

    async def ready(self, start_timeout_s: float) -> None:
        """Start the server if it is not running: first used (its listing was cached) or stopped.

        Raises:
            ToolException: it did not start, or it was closed, naming the server and why.
        """
        name = self.spec.name
        async with self._reopen:
            if self.status == "new":  # its tools were offered from the cached listing
                if not await self.open(start_timeout_s):
                    raise ToolException(f"MCP server '{name}' did not start: {self.reason}")
            elif self.status == "stopped":  # it went away during an earlier call: restart it
                if not await self.open(start_timeout_s):
                    raise ToolException(
                        f"MCP server '{name}' stopped and did not restart: {self.reason}"
                    )
            elif self.status != "connected":
                raise ToolException(f"MCP server '{name}' is not available: {self.reason}")

    async def close(self) -> None:
        """Close the session; a stdio server's process exits. Later calls are refused."""
        await self._end()
        self.status, self.reason = "failed", "closed"

    async def _end(self, *, cancel: bool = False) -> None:
        """End the owning task (at once with `cancel`: it may still be starting)."""
        self._stop.set()
        owner, self._owner = self._owner, None
        if owner is not None:
            if cancel:
                owner.cancel()
            with suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(owner, CLOSE_TIMEOUT_S)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _reason(self, exc: BaseException) -> str:
        return explain(exc, self._stderr)

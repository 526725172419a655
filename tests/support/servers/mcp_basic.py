"""A small FastMCP server for Ferry's MCP tests, with well-behaved tools and faults on demand.

    python mcp_basic.py [--name NAME] [--transport stdio|streamable-http|sse]

Over HTTP it listens on 127.0.0.1 on a port the system picks and prints `port N` on stdout
once it accepts connections. With `MCP_TEST_STARTS` set, each start appends its pid to
that file, so a test can count the processes started.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


def append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(f"{line}\n")


def build(name: str) -> FastMCP:
    server = FastMCP(name, host="127.0.0.1", port=0, log_level="WARNING")

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return f"{a} + {b} = {a + b}"

    @server.tool()
    def send_note(text: str) -> str:
        """Send a note to someone (no annotations: may have side effects, reaches out)."""
        return f"sent: {text}"

    @server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=True))
    def upsert(key: str, value: str) -> str:
        """Store a value under a key."""
        return f"{key} = {value}"

    @server.tool(annotations=READ_ONLY)
    def calculator(expression: str) -> str:
        """A calculator whose name a built-in tool already has."""
        return f"mcp calculator: {expression}"

    @server.tool(annotations=READ_ONLY)
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool(annotations=READ_ONLY)
    def secrets(ctx: Context) -> str:  # type: ignore[type-arg]
        """What the server was given: its token variable and the request's Authorization."""
        request = ctx.request_context.request
        header = request.headers.get("authorization", "") if request is not None else ""
        return f"env={os.environ.get('MCP_TEST_TOKEN', '')} header={header}"

    @server.tool()
    def crash() -> str:
        """Die in the middle of the call."""
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(annotations=READ_ONLY)
    async def hang() -> str:
        """Never answer."""
        await anyio.sleep_forever()
        return "never"

    @server.tool(annotations=READ_ONLY)
    def huge(size: int) -> str:
        """Return `size` characters."""
        return "x" * size

    @server.tool()
    async def record(text: str) -> str:
        """Record `text` in the file MCP_TEST_RECORD names (a side effect), then never answer."""
        append(os.environ["MCP_TEST_RECORD"], text)
        await anyio.sleep_forever()
        return "never"

    @server.tool(annotations=READ_ONLY)
    def fail() -> str:
        """Fail with an error the model can read."""
        raise ValueError("the ledger is locked")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="basic")
    parser.add_argument("--transport", default="stdio")
    args = parser.parse_args()
    starts = os.environ.get("MCP_TEST_STARTS")
    if starts:
        append(starts, str(os.getpid()))
    server = build(args.name)
    if args.transport == "stdio":
        server.run(transport="stdio")
        return
    import uvicorn

    app = server.sse_app() if args.transport == "sse" else server.streamable_http_app()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    sys.stdout.write(f"port {listener.getsockname()[1]}\n")  # connections queue from now on
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()

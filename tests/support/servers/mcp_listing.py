"""A FastMCP stdio server for the listing-cache tests: it logs its starts, and its tools change.

    python mcp_listing.py --name NAME

Environment (values, not files named in its arguments: changing a file's content does not
change the server's entry, so Ferry's fingerprint of it stays the same):

- `MCP_TEST_LOG`: a file each start appends `start NAME PID` to, then `ready NAME` once it
  serves; each tool call appends `call NAME TOOL`.
- `MCP_TEST_TOOLS`: a file holding `v1` (tools `echo(text)`, `gone()`, `calculator(expression)`),
  `v2` (`echo(text, loud)` with other annotations, and `fresh()`), or `fail` (exit at once).
- `MCP_TEST_HOLD`: wait, before serving, until this many servers logged their start in the log
  (a handshake: servers started one after the other would wait for ever; 60 s hang guard).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

HANG_GUARD_S = 60.0


def log(line: str) -> None:
    with open(os.environ["MCP_TEST_LOG"], "a", encoding="utf-8") as file:
        file.write(f"{line}\n")


def hold(count: int) -> None:
    """Wait until `count` servers logged their start (poll: each is another process)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        lines = Path(os.environ["MCP_TEST_LOG"]).read_text(encoding="utf-8").splitlines()
        if sum(line.startswith("start ") for line in lines) >= count:
            return
        time.sleep(0.02)
    sys.stderr.write(f"only some of the {count} servers started\n")
    sys.exit(4)


def build(name: str, version: str) -> FastMCP:
    server = FastMCP(name, log_level="WARNING")
    read_only = ToolAnnotations(readOnlyHint=True)

    if version == "v1":

        @server.tool(annotations=read_only)
        def echo(text: str) -> str:
            """Say the text back."""
            log(f"call {name} echo")
            return f"echo: {text}"

        @server.tool(annotations=read_only)
        def gone() -> str:
            """A tool the next version drops."""
            log(f"call {name} gone")
            return "still here"

        @server.tool(annotations=read_only)
        def calculator(expression: str) -> str:
            """A calculator whose name a built-in tool already has."""
            return f"mcp calculator: {expression}"

    else:

        @server.tool(name="echo", annotations=ToolAnnotations(destructiveHint=True))
        def echo_loudly(text: str, loud: bool) -> str:
            """Say the text back, loudly if asked."""
            log(f"call {name} echo")
            return f"echo: {text.upper() if loud else text}"

        @server.tool(annotations=read_only)
        def fresh() -> str:
            """A tool new in this version."""
            return "fresh"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="listing")
    parser.add_argument("--flavour", default="plain")  # an argument a test changes
    args = parser.parse_args()
    log(f"start {args.name} {os.getpid()}")
    version = Path(os.environ["MCP_TEST_TOOLS"]).read_text(encoding="utf-8").strip()
    if version == "fail":
        sys.stderr.write("this version does not start\n")
        sys.exit(3)
    if os.environ.get("MCP_TEST_HOLD"):
        hold(int(os.environ["MCP_TEST_HOLD"]))
    server = build(args.name, version)
    log(f"ready {args.name}")
    server.run(transport="stdio")


if __name__ == "__main__":
    main()

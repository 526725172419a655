"""MCP servers for the tests: the config entries that start them, and HTTP ones started here.

write_config(tmp_path, {"basic": stdio_entry()})          # Ferry starts it over stdio
with http_server("streamable-http") as url: ...          # a real server on 127.0.0.1
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).resolve().parent / "servers"
BASIC = SERVERS / "mcp_basic.py"
MALFORMED = SERVERS / "mcp_malformed.py"


def stdio_entry(name: str = "basic", script: Path = BASIC, **entry: Any) -> dict[str, Any]:
    """A Claude Desktop style entry that runs one of the test servers over stdio."""
    args = [str(script)] + (["--name", name] if script == BASIC else [])
    return {"command": sys.executable, "args": args, **entry}


def write_config(folder: Path, servers: dict[str, Any], name: str = "mcp.json") -> Path:
    path = folder / name
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


@contextlib.contextmanager
def http_server(transport: str, name: str = "basic") -> Iterator[str]:
    """Start the basic server over `streamable-http` or `sse`; yield its endpoint URL."""
    process = subprocess.Popen(
        [sys.executable, str(BASIC), "--name", name, "--transport", transport],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once the socket listens
        assert line.startswith("port "), f"the server did not start: {line!r}"
        path = "/sse" if transport == "sse" else "/mcp"
        yield f"http://127.0.0.1:{int(line.split()[1])}{path}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()

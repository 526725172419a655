"""The listing-cache tests' server (servers/mcp_listing.py): its entry, its log, its tools.

server = ListingServer(tmp_path)                 # tools v1, log in tmp_path
path = write_config(tmp_path, {"a": server.entry("a")})
server.starts()                                   # ["a", …]: one per process started
server.tools_version("v2")                        # what the next start lists
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import SERVERS, write_config

LISTING = SERVERS / "mcp_listing.py"
V1_TOOLS = ["echo", "gone", "a__calculator"]
"""The tools the test server lists at its first tools version, as the model is offered them."""


def configure(monkeypatch: pytest.MonkeyPatch, folder: Path, servers: dict[str, Any]) -> Path:
    """Write `servers` as the servers file FERRY_MCP_CONFIG names; its path."""
    path = write_config(folder, servers, name="servers.json")
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(path))
    return path


class ListingServer:
    """The files one test's listing servers share: their log and their tools' version."""

    def __init__(self, folder: Path, version: str = "v1") -> None:
        self.log = folder / "servers.log"
        self.version_file = folder / "tools-version.txt"
        self.tools_version(version)

    def entry(self, name: str, *args: str, **env: str) -> dict[str, Any]:
        """A stdio entry that runs the server as `name`, with more arguments or variables."""
        variables = {"MCP_TEST_LOG": str(self.log), "MCP_TEST_TOOLS": str(self.version_file)}
        return {
            "command": sys.executable,
            "args": [str(LISTING), "--name", name, *args],
            "env": {**variables, **env},
        }

    def tools_version(self, version: str) -> None:
        self.version_file.write_text(version, encoding="utf-8")

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def starts(self) -> list[str]:
        """The name of each server process started, in order."""
        return [line.split()[1] for line in self.lines() if line.startswith("start ")]

    def calls(self) -> list[str]:
        return [line.split(maxsplit=1)[1] for line in self.lines() if line.startswith("call ")]


def cache_file() -> Path:
    """The listing cache of this test (conftest points XDG_CACHE_HOME into tmp_path)."""
    return Path(os.environ["XDG_CACHE_HOME"]) / "ferry" / "mcp-listings.json"


def cached() -> dict[str, Any]:
    """The cache's content, as Ferry wrote it."""
    data: dict[str, Any] = json.loads(cache_file().read_text(encoding="utf-8"))
    return data


def cached_tools(server: str) -> list[list[str]]:
    """The names of the tools cached for `server`, one list per listing kept."""
    return [
        [tool["name"] for tool in entry["tools"]]
        for entry in cached()["servers"].values()
        if entry["server"] == server
    ]

"""What an MCP server lists, and the fingerprint that says when a cached listing still holds.

A listing is its tools' names, descriptions, argument schemas and annotations; the fingerprint
hashes everything it depends on (`fingerprint`).

Standard library only: a run that offers cached listings imports neither the MCP SDK nor the
adapters, and starts no server until one of its tools is called (tools/mcp/listing_cache.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tools.mcp.config import ServerSpec

FORMAT = 1
"""The cache's format; part of every fingerprint, so a new format never reads an old entry."""
_MAX_FILE_ARGUMENTS = 20
"""How many of a server's arguments are checked for a file it runs (its script, its binary)."""


@dataclass(frozen=True)
class ListedTool:
    """One tool as its server listed it: all the model and Ferry's guards are told of it."""

    name: str
    """The server's name for it (the model may see it renamed)."""
    description: str
    input_schema: dict[str, Any]
    """The JSON schema of its arguments."""
    annotations: dict[str, bool]
    """Its `…Hint` annotations (`readOnlyHint`, `destructiveHint`, …) that are set."""

    def as_data(self) -> dict[str, Any]:
        """The tool as the cache stores it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
        }


def listed_tool(adapter_tool: Any) -> ListedTool:
    """The listing of a tool `langchain-mcp-adapters` built from a live session."""
    schema = adapter_tool.args_schema
    if not isinstance(schema, dict):  # the adapters pass the server's inputSchema as it is
        schema = schema.model_json_schema() if schema is not None else {}
    hints = {
        key: value
        for key, value in (adapter_tool.metadata or {}).items()
        if key.endswith("Hint") and isinstance(value, bool)
    }
    return ListedTool(adapter_tool.name, adapter_tool.description or "", schema, hints)


def tool_from_data(data: Any) -> ListedTool | None:
    """A cached tool, or None when `data` is not one the cache wrote."""
    if not isinstance(data, dict) or set(data) != {
        "name",
        "description",
        "input_schema",
        "annotations",
    }:
        return None
    name, description = data["name"], data["description"]
    schema, hints = data["input_schema"], data["annotations"]
    if not (isinstance(name, str) and name and isinstance(description, str)):
        return None
    if not isinstance(schema, dict) or not isinstance(hints, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, bool) for k, v in hints.items()):
        return None
    return ListedTool(name, description, schema, hints)


def fingerprint(spec: ServerSpec, config: Path) -> str:
    """What a listing of `spec`'s server depends on, hashed: equal means the listing is reusable.

    The server's entry as Ferry runs it (`${VAR}`s expanded: command, args, env, cwd, or url and
    headers), the servers file it came from (only a file Ferry may use gets here: a folder's
    `mcp.json` is checked for trust first), the size and modification time of the program it
    runs and of any file its arguments name, and Ferry's version. Only the hash is kept, so
    no `env` or `headers` value is written anywhere.
    """
    parts = {
        "format": FORMAT,
        "ferry": _ferry_version(),
        "config": str(config.resolve()),
        "server": spec.name,
        "transport": spec.transport,
        "connection": spec.connection,
        "files": _files_run(spec) if spec.transport == "stdio" else [],
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _files_run(spec: ServerSpec) -> list[tuple[str, int, int]]:
    """The program a stdio server runs, and the files its arguments name: path, mtime, size.

    An upgraded server binary, or an edited `server.py`, is a new server. A package a launcher
    fetches (`npx -y pkg`, `uvx pkg`) is not seen here: the listing's age bounds that.
    """
    connection = spec.connection
    folder = Path(connection.get("cwd") or os.getcwd())
    env_path = (connection.get("env") or {}).get("PATH", os.environ.get("PATH"))
    command = str(connection["command"])
    program = shutil.which(command, path=env_path) if os.sep not in command else None
    candidates = [Path(program) if program else folder / command]
    arguments = [a for a in connection.get("args") or [] if not str(a).startswith("-")]
    candidates += [folder / str(a) for a in arguments[:_MAX_FILE_ARGUMENTS]]
    found = []
    for path in candidates:
        try:
            resolved = path.resolve()
            status = resolved.stat()
        except (OSError, ValueError):  # not a file (an option's value, a URL): nothing to check
            continue
        if resolved.is_file():
            found.append((str(resolved), status.st_mtime_ns, status.st_size))
    return found


@cache
def _ferry_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ferry-agent")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"

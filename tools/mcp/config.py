"""The MCP servers file: the `mcpServers` shape of Claude Desktop, Cursor and Claude Code.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "${TOKEN}"}},
        "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}},
        "old": {"type": "sse", "url": "http://127.0.0.1:8080/sse"},
        "shop": {"url": "…", "tools": {"order": {"retry_safe": false, "outbound": true}}},
        "time": {"command": "uvx", "args": ["mcp-server-time"], "approve": false}}}

A `command` means stdio; a `url` means streamable HTTP unless `type` (or `transport`) says
`sse`. `${VAR}` and `${VAR:-default}` are read from the environment. The values of `env` and
`headers` are treated as secrets. `approve` and `tools` are Ferry's own keys. `approve`: true
makes every tool of the server ask a person before each call, false none of them; without it,
a tool asks unless it declares `readOnlyHint`. `tools`: per tool, `approve`, `retry_safe`,
`outbound` and `private` override the server's `approve` and what the tool's annotations say.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tools.settings import remember_secrets
from tools.trust import MCP_FILE, FolderFile, trusted_mcp_file

DEFAULT_FILE = MCP_FILE
"""Read from the working directory when `FERRY_MCP_CONFIG` is not set, once the user trusted it."""
Transport = Literal["stdio", "streamable_http", "sse"]
_TRANSPORTS: dict[str, Transport] = {
    **{name: "streamable_http" for name in ("http", "streamable_http", "streamable-http")},
    "streamableHttp": "streamable_http",
    "stdio": "stdio",
    "sse": "sse",
}
OVERRIDES = ("approve", "retry_safe", "outbound", "private")
"""What a server's `tools` entry may set for one of its tools."""
# The `env` and `headers` values are secrets (redacted from logs, results and errors), except
# these well-known ones: redacting `application/json` or a PATH would garble ordinary text.
_PUBLIC_VARIABLES = frozenset(
    {"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "NODE_ENV", "PYTHONPATH", "LOG_LEVEL"}
)
_PUBLIC_HEADERS = frozenset({"accept", "content-type", "user-agent", "mcp-protocol-version"})
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(ValueError):
    """The MCP servers file cannot be used; the message names the file and what to fix."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured server, as `langchain-mcp-adapters` connects to it."""

    name: str
    transport: Transport
    connection: dict[str, Any] = field(repr=False)  # holds the env and headers: secrets
    """The adapters' connection (`transport`, `command`/`args`/`env`/`cwd` or `url`/`headers`)."""
    overrides: dict[str, dict[str, bool]] = field(default_factory=dict)
    """Tool name → what the user set for it (`OVERRIDES`): wins over its annotations."""
    approve: bool | None = None
    """Whether every tool of the server asks a person first (True), none does (False), or
    each as its annotations say (None); a tool's own `approve` override wins over it."""
    problem: str | None = None
    """Why the server cannot be started (a variable the file uses is not set), if so."""

    @property
    def key(self) -> str:
        """What identifies the server's session: the same entry reuses the same session."""
        return json.dumps([self.name, self.connection], sort_keys=True, default=str)


def config_file(given: Path | None = None) -> FolderFile | None:
    """The MCP servers file, read once: `given`, else `FERRY_MCP_CONFIG`, else a trusted `mcp.json`.

    A folder's own `mcp.json` runs commands: it is used only once the user trusted it (`ferry
    trust`), like the folder's `.env`; until then it is named on stderr, once. The bytes
    returned are those whose hash was checked: parse them (`read_config`), never the path again.

    Raises:
        McpConfigError: the file named does not exist or cannot be read.
    """
    named = given or (
        Path(os.environ["FERRY_MCP_CONFIG"]) if os.environ.get("FERRY_MCP_CONFIG") else None
    )
    if named is None:
        return trusted_mcp_file()
    if not named.is_file():
        raise McpConfigError(f"FERRY_MCP_CONFIG: {named} is not a file (the MCP servers file)")
    return _read(named)


def read_config(file: FolderFile | Path) -> list[ServerSpec]:
    """The servers the file configures (those marked `"disabled": true` left out).

    Args:
        file: The file as read (`config_file`), whose bytes are parsed; or a path, read here.

    Raises:
        McpConfigError: the file cannot be read or is not JSON in the `mcpServers` shape.
    """
    file = _read(file) if isinstance(file, Path) else file
    path = file.path
    try:
        data = json.loads(file.content.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"{path}: not valid JSON ({exc})") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{"<name>": {{…}}, …}}}}')
    specs = []
    for name, entry in servers.items():
        where = f"{path}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise McpConfigError(f'{where}: expected an object with "command" or "url"')
        if entry.get("disabled") is not True:
            specs.append(_server(where, path.parent, name, entry))
    return specs


def _read(path: Path) -> FolderFile:
    try:
        return FolderFile.read(path)
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot read the MCP servers file ({exc.strerror})") from exc


def _server(where: str, folder: Path, name: str, entry: dict[str, Any]) -> ServerSpec:
    kind = entry.get("type", entry.get("transport"))
    if kind is None:
        if "command" not in entry and "url" not in entry:
            raise McpConfigError(f'{where}: give "command" (a stdio server) or "url" (HTTP)')
        kind = "stdio" if "command" in entry else "http"
    transport = _TRANSPORTS.get(kind) if isinstance(kind, str) else None
    if transport is None:
        raise McpConfigError(f'{where}.type: {kind!r} is not one of "stdio", "http", "sse"')
    missing: list[str] = []
    secrets: set[str] = set()
    if transport == "stdio":
        command = _text(where, entry, "command", missing)
        args = [_expand(a, missing) for a in _strings(where, entry, "args", list)]
        env = {k: _expand(v, missing) for k, v in _strings(where, entry, "env", dict).items()}
        cwd = _expand(entry["cwd"], missing) if isinstance(entry.get("cwd"), str) else None
        secrets |= {v for k, v in env.items() if k.upper() not in _PUBLIC_VARIABLES}
        connection: dict[str, Any] = {
            "transport": "stdio",
            "command": command,
            "args": args,
            "env": env or None,
            "cwd": str(folder / cwd) if cwd else None,
        }
    else:
        url = _text(where, entry, "url", missing)
        if not url.startswith(("http://", "https://")):
            raise McpConfigError(f"{where}.url: expected an http:// or https:// URL")
        headers = {
            k: _expand(v, missing) for k, v in _strings(where, entry, "headers", dict).items()
        }
        private = [v for k, v in headers.items() if k.lower() not in _PUBLIC_HEADERS]
        secrets |= {*private, *(v.partition(" ")[2] for v in private)}  # "Bearer …" too
        secrets |= {urlsplit(url).password or ""}
        connection = {"transport": transport, "url": url, "headers": headers or None}
    remember_secrets(secrets)  # graph/core/log.py leaves out the values too short to be secrets
    problem = f"{', '.join(missing)} not set (used in the MCP servers file)" if missing else None
    overrides = _overrides(where, entry.get("tools"))
    approve = _approve(where, entry.get("approve"))
    return ServerSpec(name, transport, connection, overrides, approve=approve, problem=problem)


def _text(where: str, entry: dict[str, Any], key: str, missing: list[str]) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise McpConfigError(f"{where}.{key}: expected a non-empty string")
    return _expand(value, missing)


def _strings(where: str, entry: dict[str, Any], key: str, kind: type) -> Any:
    """`entry[key]`: a list of strings or an object of strings (empty when absent)."""
    value = entry.get(key) or kind()
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, kind) or not all(isinstance(v, str) for v in items):
        shape = "a list of strings" if kind is list else "an object of strings"
        raise McpConfigError(f"{where}.{key}: expected {shape}")
    return value


def _expand(value: str, missing: list[str]) -> str:
    """`value` with `${VAR}` and `${VAR:-default}` replaced; unset names go to `missing`."""

    def variable(match: re.Match[str]) -> str:
        name, default = match[1], match[2]
        if name in os.environ:
            return os.environ[name]
        if default is None:
            missing.append(name)
        return default or ""

    return _VARIABLE.sub(variable, value)


def _approve(where: str, given: Any) -> bool | None:
    if given is None or isinstance(given, bool):
        return given
    raise McpConfigError(
        f"{where}.approve: expected true (every tool asks before each call) or false (none "
        f"asks), not {json.dumps(given)}"
    )


def _overrides(where: str, given: Any) -> dict[str, dict[str, bool]]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise McpConfigError(f'{where}.tools: expected {{"<tool>": {{"approve": true, …}}, …}}')
    overrides: dict[str, dict[str, bool]] = {}
    for tool, values in given.items():
        if not isinstance(values, dict):
            raise McpConfigError(
                f"{where}.tools.{tool}: expected an object of {', '.join(OVERRIDES)} "
                "(each true or false)"
            )
        for key, value in values.items():
            if key not in OVERRIDES:
                raise McpConfigError(
                    f"{where}.tools.{tool}: {json.dumps(key)} is not one of {', '.join(OVERRIDES)}"
                )
            if not isinstance(value, bool):
                raise McpConfigError(
                    f"{where}.tools.{tool}.{key}: expected true or false, not {json.dumps(value)}"
                )
        overrides[tool] = dict(values)
    return overrides

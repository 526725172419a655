"""The MCP servers file: the spellings of Claude Desktop, Cursor, Claude Code and the adapters,
Ferry's per-tool overrides, and one line naming the file and what to fix when it cannot work.

No server is started here: a file's servers are read, not connected to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graph import build_graph
from graph.log import redact
from graph.settings import ConfigError, Settings
from tests.support.scripted import ScriptedModel
from tests.support.trust import trust_folder
from tools.mcp import McpConfigError, config_path, mcp_tools, read_config
from tools.mcp.loader import tool_metadata


def write(tmp_path: Path, content: Any, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def servers(tmp_path: Path, **entries: Any) -> Path:
    return write(tmp_path, {"mcpServers": entries})


def test_each_clients_spelling_is_understood(tmp_path: Path) -> None:
    path = servers(
        tmp_path,
        desktop={"command": "npx", "args": ["-y", "srv"], "env": {"MODE": "x"}},
        cursor={"url": "https://example.com/mcp"},
        code_http={"type": "http", "url": "https://example.com/mcp"},
        code_sse={"type": "sse", "url": "https://example.com/sse"},
        adapters={"transport": "streamable_http", "url": "http://127.0.0.1:1/mcp"},
        explicit_stdio={"type": "stdio", "command": "srv", "cwd": "sub"},
        off={"command": "srv", "disabled": True},
    )
    specs = {spec.name: spec for spec in read_config(path)}
    assert {name: spec.transport for name, spec in specs.items()} == {
        "desktop": "stdio",
        "cursor": "streamable_http",
        "code_http": "streamable_http",
        "code_sse": "sse",
        "adapters": "streamable_http",
        "explicit_stdio": "stdio",
    }
    assert specs["desktop"].connection == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "srv"],
        "env": {"MODE": "x"},
        "cwd": None,
    }
    assert specs["explicit_stdio"].connection["cwd"] == str(tmp_path / "sub")  # the file's folder
    assert specs["code_sse"].connection == {
        "transport": "sse",
        "url": "https://example.com/sse",
        "headers": None,
    }


def test_variables_are_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN_VALUE", "tok-from-the-environment")
    path = servers(
        tmp_path,
        s={"command": "srv", "env": {"TOKEN": "${MCP_TEST_TOKEN_VALUE}", "R": "${NOPE:-dflt}"}},
        gap={"command": "srv", "env": {"TOKEN": "${MCP_TEST_NOT_SET}"}},
    )
    s, gap = read_config(path)
    assert s.connection["env"] == {"TOKEN": "tok-from-the-environment", "R": "dflt"}
    assert s.problem is None
    assert gap.problem == "MCP_TEST_NOT_SET not set (used in the MCP servers file)"


def test_env_and_header_values_are_redacted_once_the_file_is_read(tmp_path: Path) -> None:
    env_secret, header_token = "env-secret-6d1f0c", "hdr-token-93ab77"
    path = servers(
        tmp_path,
        s={"command": "srv", "env": {"PLAIN_NAME": env_secret}},
        h={"url": "https://example.com/mcp", "headers": {"X-Api": f"Bearer {header_token}"}},
    )
    read_config(path)
    assert redact(f"got {env_secret} and {header_token}") == "got [redacted] and [redacted]"
    public = servers(
        tmp_path,
        s={"command": "srv", "env": {"NODE_ENV": "production-like"}},
        h={"url": "https://example.com/mcp", "headers": {"Content-Type": "application/json"}},
    )
    read_config(public)  # well-known values that are no secret stay readable
    assert redact("production-like application/json") == "production-like application/json"
    assert env_secret not in repr(read_config(path))  # nor in a spec's repr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ({"servers": {}}, 'expected {"mcpServers"'),
        ({"mcpServers": {"x": []}}, 'mcpServers.x: expected an object with "command" or "url"'),
        ({"mcpServers": {"x": {"args": []}}}, 'mcpServers.x: give "command"'),
        ({"mcpServers": {"x": {"type": "websocket", "url": "ws://h"}}}, "mcpServers.x.type"),
        ({"mcpServers": {"x": {"url": "ftp://h"}}}, "mcpServers.x.url: expected an http"),
        ({"mcpServers": {"x": {"command": "s", "args": "a b"}}}, "x.args: expected a list"),
        ({"mcpServers": {"x": {"command": "s", "env": {"A": 1}}}}, "x.env: expected an object"),
        (
            {"mcpServers": {"x": {"command": "s", "tools": {"t": {"retry": True}}}}},
            'mcpServers.x.tools.t: expected {"<tool>": {"retry_safe"',
        ),
    ],
)
def test_a_file_that_cannot_work_is_one_line_naming_it(
    tmp_path: Path, content: Any, message: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(McpConfigError) as raised:
        read_config(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_build_graph_reports_a_bad_file_as_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "{not json", name="servers.json")
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(path))
    with pytest.raises(ConfigError, match=r"servers\.json: not valid JSON"):
        build_graph(model=ScriptedModel(), settings=Settings())


def test_the_file_is_found_where_the_settings_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config_path() is None  # no mcp.json in the working directory: no MCP tools
    assert mcp_tools() == []
    default = servers(tmp_path)
    assert config_path() is None  # not trusted yet: ignored (tests/integration/test_folder_trust)
    trust_folder(tmp_path)
    assert config_path() == default
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(tmp_path / "missing.json"))
    with pytest.raises(McpConfigError, match="FERRY_MCP_CONFIG: .*missing.json is not a file"):
        config_path()
    assert mcp_tools(default) == []  # an empty `mcpServers`


def test_annotations_map_onto_the_guards_metadata_and_the_config_wins(tmp_path: Path) -> None:
    path = servers(
        tmp_path, s={"command": "srv", "tools": {"order": {"retry_safe": True, "private": True}}}
    )
    (spec,) = read_config(path)

    def meta(tool: str, **hints: bool) -> tuple[bool, bool, bool]:
        found = tool_metadata(spec, tool, hints)
        assert found["source"] == "mcp:s"
        return found["retry_safe"], found["outbound"], found["private"]

    assert meta("t") == (False, True, True)  # no hint: side effects, reaches out, user's data
    # A server's word is not the user's: outbound and private whatever openWorldHint says.
    assert meta("t", readOnlyHint=True, openWorldHint=False) == (True, True, True)
    assert meta("t", idempotentHint=True, destructiveHint=True) == (True, True, True)
    assert meta("t", destructiveHint=True, openWorldHint=True) == (False, True, True)
    assert tool_metadata(spec, "order", {"destructiveHint": True}) == {
        "source": "mcp:s",
        "retry_safe": True,
        "outbound": True,
        "private": True,
    }

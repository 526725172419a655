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
from graph.core.log import redact
from graph.core.settings import ConfigError, Settings
from tests.support.scripted import ScriptedModel
from tests.support.trust import trust_folder
from tools.mcp import McpConfigError, config_file, mcp_tools, read_config
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
            'mcpServers.x.tools.t: "retry" is not one of approve, retry_safe, outbound, private',
        ),
        (
            {"mcpServers": {"x": {"command": "s", "tools": ["t"]}}},
            'mcpServers.x.tools: expected {"<tool>": {"approve": true, …}, …}',
        ),
        (
            {"mcpServers": {"x": {"command": "s", "tools": {"t": True}}}},
            "mcpServers.x.tools.t: expected an object of approve, retry_safe, outbound, private "
            "(each true or false)",
        ),
        (
            {"mcpServers": {"x": {"command": "s", "approve": "never"}}},
            "mcpServers.x.approve: expected true (every tool asks before each call) or false "
            '(none asks), not "never"',
        ),
        (
            {"mcpServers": {"x": {"command": "s", "approve": 0}}},
            "mcpServers.x.approve: expected true (every tool asks before each call) or false "
            "(none asks), not 0",
        ),
        (
            {"mcpServers": {"x": {"command": "s", "tools": {"t": {"approve": "always"}}}}},
            'mcpServers.x.tools.t.approve: expected true or false, not "always"',
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
    assert config_file() is None  # no mcp.json in the working directory: no MCP tools
    assert mcp_tools() == []
    default = servers(tmp_path)
    assert config_file() is None  # not trusted yet: ignored (tests/integration/test_folder_trust)
    trust_folder(tmp_path)
    found = config_file()
    assert found is not None and found.path == default
    assert found.content == default.read_bytes()
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(tmp_path / "missing.json"))
    with pytest.raises(McpConfigError, match="FERRY_MCP_CONFIG: .*missing.json is not a file"):
        config_file()
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
        "approval": "it declares destructiveHint (it may delete or overwrite things)",
    }


NO_HINT = "it does not declare readOnlyHint (it may change things)"
DESTRUCTIVE = "it declares destructiveHint (it may delete or overwrite things)"
READ_WRITE = "it declares readOnlyHint false (it changes things)"


def approval(tmp_path: Path, entry: dict[str, Any], tool: str, **hints: bool) -> Any:
    """The `approval` metadata of `tool` of server `s`, configured as `entry`; absent: "-"."""
    (spec,) = read_config(servers(tmp_path, s={"command": "srv", **entry}))
    return tool_metadata(spec, tool, hints).get("approval", "-")


def test_only_a_tool_that_declares_read_only_runs_without_approval(tmp_path: Path) -> None:
    assert approval(tmp_path, {}, "read", readOnlyHint=True) == "-"  # no key at all
    assert approval(tmp_path, {}, "read", readOnlyHint=True, destructiveHint=True) == "-"
    assert approval(tmp_path, {}, "write") == NO_HINT
    assert approval(tmp_path, {}, "write", openWorldHint=False) == NO_HINT
    assert approval(tmp_path, {}, "write", idempotentHint=True) == NO_HINT  # retry-safe, not safe
    assert approval(tmp_path, {}, "delete", destructiveHint=True) == DESTRUCTIVE
    assert approval(tmp_path, {}, "write", readOnlyHint=False) == READ_WRITE


def test_a_server_s_approve_sets_all_its_tools_and_a_tool_s_own_wins(tmp_path: Path) -> None:
    never = {"approve": False, "tools": {"write": {"approve": True}}}
    assert approval(tmp_path, never, "delete", destructiveHint=True) == "-"
    assert approval(tmp_path, never, "other") == "-"
    assert approval(tmp_path, never, "write", readOnlyHint=True) == (
        "the MCP servers file asks for it (mcpServers.s.tools.write.approve)"
    )
    always = {"approve": True, "tools": {"read": {"approve": False}}}
    assert approval(tmp_path, always, "other", readOnlyHint=True) == (
        "the MCP servers file asks for it (mcpServers.s.approve)"
    )
    assert approval(tmp_path, always, "read") == "-"
    # Without a server-level `approve`, a tool's own works both ways.
    own = {"tools": {"read": {"approve": True}, "write": {"approve": False}}}
    assert approval(tmp_path, own, "read", readOnlyHint=True).endswith("tools.read.approve)")
    assert approval(tmp_path, own, "write", destructiveHint=True) == "-"
    assert approval(tmp_path, own, "other") == NO_HINT  # only the tools named
    # `approve` is no guard's metadata: the other overrides are still read as before.
    (spec,) = read_config(servers(tmp_path, s={"command": "s", "tools": {"t": {"approve": False}}}))
    assert tool_metadata(spec, "t", {}) == {
        "source": "mcp:s",
        "retry_safe": False,
        "outbound": True,
        "private": True,
    }


def test_approve_true_or_false_and_absent_are_kept_on_the_server(tmp_path: Path) -> None:
    path = servers(
        tmp_path,
        ask={"command": "s", "approve": True},
        trusted={"command": "s", "approve": False},
        default={"command": "s"},
    )
    assert {spec.name: spec.approve for spec in read_config(path)} == {
        "ask": True,
        "trusted": False,
        "default": None,
    }

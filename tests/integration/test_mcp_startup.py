"""MCP start-up: servers start together, a cached listing offers their tools without starting
them, the first call starts its server, and a rename is warned of once per servers file.

The servers are real processes (tests/support/servers/mcp_listing.py) that log each start, so
"not started" is read from their log, never from how long something took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from graph import build_graph
from graph.storage import sqlite_saver
from tests.support.cli_helpers import Ferry, ferry, ferry_env, one_json_object, succeeded
from tests.support.listings import V1_TOOLS, ListingServer, cache_file, cached_tools, configure
from tests.support.mcp import write_config
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.turns import ask
from tools.mcp import close_sessions, mcp_servers, mcp_tools

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("mcp_sessions_closed")]


@pytest.fixture
def server(tmp_path: Path) -> ListingServer:
    return ListingServer(tmp_path)


def test_servers_start_together_not_one_after_the_other(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    # Each waits, before it serves, until both have started: one after the other, the first
    # would wait for the second for ever (and fail at its start timeout).
    configure(
        monkeypatch,
        tmp_path,
        {"a": server.entry("a", MCP_TEST_HOLD="2"), "b": server.entry("b", MCP_TEST_HOLD="2")},
    )
    status = {s.name: (s.status, s.reason) for s in mcp_servers(start_timeout_s=90)}

    assert status == {"a": ("connected", ""), "b": ("connected", "")}
    first, second, *rest = server.lines()
    assert {first.split()[:2][1], second.split()[1]} == {"a", "b"}
    assert [first.split()[0], second.split()[0]] == ["start", "start"]
    assert sorted(rest) == ["ready a", "ready b"]  # neither served before both had started


def test_a_cached_listing_offers_the_tools_and_starts_no_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    assert [t.name for t in mcp_tools()] == V1_TOOLS
    assert server.starts() == ["a"]
    close_sessions()  # as a new process: nothing running

    tools = {t.name: t for t in mcp_tools()}

    assert list(tools) == V1_TOOLS
    assert server.starts() == ["a"]  # offered from the cache, not started
    assert tools["echo"].description == "Say the text back."
    assert tools["echo"].args_schema["properties"].keys() == {"text"}  # type: ignore[index]
    assert tools["echo"].metadata == {
        "source": "mcp:a",
        "retry_safe": True,  # readOnlyHint, from the cached annotations
        "outbound": True,
        "private": True,
    }


def test_a_new_process_with_a_cached_listing_imports_no_mcp_sdk(
    tmp_path: Path, server: ListingServer
) -> None:
    path = write_config(tmp_path, {"a": server.entry("a")})
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(path))
    probe = (
        "import sys; from tools.mcp import mcp_tools; "
        "print(*[t.name for t in mcp_tools()], 'mcp' in sys.modules)"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        for _ in range(2)
    ]

    assert runs[0] == [*V1_TOOLS, "True"]  # listed by starting the server: the SDK is loaded
    assert runs[1] == [*V1_TOOLS, "False"]  # from the cache: neither the SDK nor a server
    assert server.starts() == ["a"]


def test_the_first_call_starts_the_server_and_the_model_gets_its_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    mcp_tools()
    close_sessions()
    model = ScriptedModel([tool_call("echo", text="hi"), answer("it said hi")])
    graph = build_graph(model=model, checkpointer=sqlite_saver(tmp_path / "t.db"))
    assert server.starts() == ["a"]  # the graph offers the tools; nothing started yet

    state = ask(graph, "echo hi")

    model.assert_complete()
    assert model.bound_tools[-3:] == V1_TOOLS
    [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert (result.name, result.status, result.content) == ("echo", "success", "echo: hi")
    # Started by the call, then called: the second start, its readiness, the call, in order.
    assert server.lines()[-3:] == [server.lines()[-3], "ready a", "call a echo"]
    assert server.lines()[-3].startswith("start a ")
    assert server.starts() == ["a", "a"]
    assert state["messages"][-1].content == "it said hi"


def test_ferry_ask_reuses_the_listing_and_ferry_tools_refreshes_it(
    cli: Ferry, tmp_path: Path, server: ListingServer
) -> None:
    path = write_config(tmp_path, {"a": server.entry("a")})
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(path))
    ask = ("ask", "what is 2+2", "--model", "offline", "--json")

    # The first in this process (its session closed as at its exit), the next a process.
    first = one_json_object(cli(*ask, env=env, cwd=tmp_path))
    close_sessions()
    second = one_json_object(ferry(*ask, env=env, cwd=tmp_path))
    assert server.starts() == ["a"]  # the second run started no server
    assert [first["answer"], second["answer"]] == ["`2+2` = 4", "`2+2` = 4"]

    # `ferry tools` in this process, its session closed after each as at a process's exit.
    listed = json.loads(succeeded(cli("tools", "--json", env=env, cwd=tmp_path)).stdout)
    close_sessions()
    assert [t["name"] for t in listed["tools"] if t["source"] == "mcp:a"] == V1_TOOLS
    assert server.starts() == ["a", "a"]  # `ferry tools` lists what the server has now

    server.tools_version("v2")
    listed = json.loads(succeeded(cli("tools", "--json", env=env, cwd=tmp_path)).stdout)
    close_sessions()
    assert [t["name"] for t in listed["tools"] if t["source"] == "mcp:a"] == ["echo", "fresh"]
    assert cached_tools("a") == [["echo", "fresh"]]  # and what the next ask offers


def test_a_rename_is_warned_of_once_until_the_servers_file_changes(
    cli: Ferry, tmp_path: Path, server: ListingServer
) -> None:
    path = write_config(tmp_path, {"a": server.entry("a")}, name="servers.json")
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(path))
    warning = (
        "MCP server 'a': tools renamed (a built-in tool or another server's has the name, or it "
        "is not a valid tool name): calculator → a__calculator"
    )

    def run(ferry: Ferry) -> str:
        done = succeeded(ferry("ask", "what is 2+2", "--model", "offline", env=env, cwd=tmp_path))
        close_sessions()  # as at the process's exit
        return done.stderr

    # Each file's first run in this process (what it said there cannot hide what the next one
    # says: the warning is remembered per file), the next in a process of its own.
    assert [warning in run(cli), warning in run(ferry)] == [True, False]
    assert server.starts() == ["a"]

    write_config(tmp_path, {"a": server.entry("a", "--flavour", "salty")}, name="servers.json")
    assert [warning in run(cli), warning in run(ferry)] == [True, False]
    assert server.starts() == ["a", "a"]  # a changed entry is listed again, once
    assert cache_file().stat().st_mode & 0o777 == 0o600

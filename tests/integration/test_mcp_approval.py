"""MCP tools that may change things ask a person first, unless the servers file says otherwise.

A tool that does not declare `readOnlyHint: true` carries `metadata["approval"]` (why it asks);
the approval gate holds each of its calls in LangChain's HITL format, the reason in the
description. `approve` in the servers file, per server or per tool, says otherwise both ways.
`ferry tools` shows which tools ask and why. The servers are real (tests/support/servers/).
`make_agent`'s graphs are on Ferry's saver alone (see `saver` below).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import default_saver, sqlite_saver
from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.fixtures import Agent, Scripted
from tests.support.listings import V1_TOOLS, ListingServer, configure
from tests.support.mcp import stdio_entry, write_config
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call
from tools import TOOLS
from tools.mcp import close_sessions, mcp_tools

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("mcp_sessions_closed")]
NO_HINT = "it does not declare readOnlyHint (it may change things)"
DESTRUCTIVE = "it declares destructiveHint (it may delete or overwrite things)"
ASKED_BY_FILE = "the MCP servers file asks for it (mcpServers.basic.{})"
THREAD = {"configurable": {"thread_id": "t1"}}


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """Ferry's saver, the one users get, for `make_agent`'s graphs.

    Not also LangGraph's in-memory one, as conftest's would: an MCP tool's call is held and
    resumed by the approval gate as any tool's is, which tests/unit/test_approval.py runs on
    both savers.
    """
    ferry = default_saver(Settings(db=tmp_path / "ferry.db"))
    yield ferry
    ferry.conn.close()


def results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def held(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls the run paused on, as LangChain's HITL request lists them."""
    [pause] = state["__interrupt__"]
    requests: list[dict[str, Any]] = pause.value["action_requests"]
    return requests


# --- the run pauses ---------------------------------------------------------------------------


def test_a_tool_without_read_only_waits_for_approval_and_a_read_only_one_does_not(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configure(monkeypatch, tmp_path, {"basic": stdio_entry()})
    model = scripted(
        [parallel(tool_call("add", a=1, b=2), tool_call("send_note", text="hi")), "ok"]
    )
    graph = make_agent(model)

    paused = graph.invoke({"messages": [("user", "add, then send a note")]}, THREAD)

    [request] = held(paused)
    assert (request["name"], request["args"]) == ("send_note", {"text": "hi"})
    assert NO_HINT in request["description"]
    assert results(paused) == []  # nothing ran: the reply's calls wait together
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
    assert [(r.name, r.status, r.content) for r in results(done)] == [
        ("add", "success", "1 + 2 = 3"),
        ("send_note", "success", "sent: hi"),
    ]


def test_a_rejected_call_does_not_run(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configure(monkeypatch, tmp_path, {"basic": stdio_entry()})
    graph = make_agent(scripted([tool_call("upsert", key="k", value="v"), "not stored"]))

    paused = graph.invoke({"messages": [("user", "store k")]}, THREAD)
    assert DESTRUCTIVE in held(paused)[0]["description"]
    reject = {"type": "reject", "message": "not now"}
    done = graph.invoke(Command(resume={"decisions": [reject]}), THREAD)

    [result] = results(done)
    assert (result.name, result.status) == ("upsert", "error")
    assert result.content.startswith("The user declined this call (not now).")


def test_approve_true_on_a_read_only_tool_makes_it_ask(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entry = stdio_entry(approve=False, tools={"add": {"approve": True}})
    configure(monkeypatch, tmp_path, {"basic": entry})
    graph = make_agent(scripted([tool_call("add", a=2, b=2), "4"]))

    paused = graph.invoke({"messages": [("user", "2 + 2?")]}, THREAD)

    [request] = held(paused)
    assert request["name"] == "add"
    assert ASKED_BY_FILE.format("tools.add.approve") in request["description"]
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
    assert [r.content for r in results(done)] == ["2 + 2 = 4"]


def test_approve_false_on_the_server_runs_its_tools_unasked(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configure(monkeypatch, tmp_path, {"basic": stdio_entry(approve=False)})
    calls = parallel(tool_call("send_note", text="hi"), tool_call("upsert", key="k", value="v"))
    graph = make_agent(scripted([calls, answer("done")]))

    done = graph.invoke({"messages": [("user", "send hi, store k")]}, THREAD)

    assert "__interrupt__" not in done
    assert [(r.status, r.content) for r in results(done)] == [
        ("success", "sent: hi"),
        ("success", "k = v"),
    ]


def test_a_tool_that_lost_read_only_asks_from_its_next_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = ListingServer(tmp_path)
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    assert [t.name for t in mcp_tools()] == V1_TOOLS
    close_sessions()  # as a new process: the next offer is the cached listing
    server.tools_version("v2")  # echo: destructiveHint now, and a new argument
    offered = mcp_tools()
    echo = next(t for t in offered if t.name == "echo")
    assert "approval" not in (echo.metadata or {})  # read-only, as last listed
    model = ScriptedModel(
        [tool_call("echo", text="hi"), tool_call("echo", text="hi", loud=True), answer("done")]
    )
    graph = build_graph(
        model=model, tools=[*TOOLS, *offered], checkpointer=sqlite_saver(tmp_path / "t.db")
    )

    paused = graph.invoke({"messages": [("user", "echo hi")]}, THREAD)

    [changed] = results(paused)  # the call made on the old listing: refused, the tool changed
    assert changed.content.startswith("MCP server 'a' changed the tool 'echo'")
    assert (echo.metadata or {})["approval"] == DESTRUCTIVE  # judged by what it is now
    [request] = held(paused)
    assert request["args"] == {"text": "hi", "loud": True}
    assert DESTRUCTIVE in request["description"]
    assert server.calls() == []  # the server ran neither call
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
    assert results(done)[-1].content == "echo: HI"
    model.assert_complete()


# --- the CLI ----------------------------------------------------------------------------------


def test_ferry_tools_call_of_a_tool_that_asks_needs_approve_without_a_terminal(
    cli: Ferry, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry()}, name="servers.json")
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(config))

    asked = cli("tools", "call", "send_note", '{"text": "hi"}', env=env, cwd=tmp_path)
    approved = cli(
        "tools", "call", "send_note", '{"text": "hi"}', "--approve", env=env, cwd=tmp_path
    )

    assert asked.returncode == 2 and asked.stdout == ""
    assert "needs approval (send_note): " in asked.stderr and NO_HINT in asked.stderr
    assert (approved.returncode, approved.stdout) == (0, "sent: hi\n")


def tools_listed(cli: Ferry, tmp_path: Path, entry: dict[str, Any], **env: str) -> Any:
    """`ferry tools --json` and plain, for the basic server configured as `entry`."""
    config = write_config(tmp_path, {"basic": entry}, name="servers.json")
    environment = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(config), **env)
    listed = one_json_object(cli("tools", "--json", env=environment, cwd=tmp_path))["tools"]
    plain = succeeded(cli("tools", env=environment, cwd=tmp_path)).stdout
    return {t["name"]: t["approval"] for t in listed}, plain


def test_ferry_tools_shows_which_tools_ask_and_why(cli: Ferry, tmp_path: Path) -> None:
    overrides = {"pid": {"approve": True}, "crash": {"approve": False}}
    approval, plain = tools_listed(
        cli, tmp_path, stdio_entry(tools=overrides), FERRY_APPROVE_TOOLS="read_file"
    )

    assert approval["add"] is None and approval["calculator"] is None  # read-only; built-in
    assert approval["send_note"] == NO_HINT
    assert approval["upsert"] == DESTRUCTIVE  # idempotent, but it may overwrite
    assert approval["pid"] == ASKED_BY_FILE.format("tools.pid.approve")
    assert approval["crash"] is None  # the servers file says it needs no approval
    assert approval["read_file"] == "FERRY_APPROVE_TOOLS names it"
    lines = plain.splitlines()
    note = lines.index("send_note(text: string)  [mcp:basic]")
    assert lines[note + 2] == f"    asks first: {NO_HINT}"  # after its description
    add = lines.index("add(a: integer, b: integer)  [mcp:basic]")
    assert not lines[add + 2].startswith("    asks first")
    assert plain.count("    asks first: ") == sum(1 for why in approval.values() if why)


def test_ferry_tools_shows_a_server_s_approve_and_a_tool_s_exception(
    cli: Ferry, tmp_path: Path
) -> None:
    entry = stdio_entry(approve=True, tools={"send_note": {"approve": False}})
    approval, plain = tools_listed(cli, tmp_path, entry)

    assert approval["add"] == ASKED_BY_FILE.format("approve")  # read-only, asks all the same
    assert approval["send_note"] is None
    assert f"    asks first: {ASKED_BY_FILE.format('approve')}" in plain.splitlines()


def test_ferry_info_marks_the_mcp_tools_that_ask(cli: Ferry, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"basic": stdio_entry()}, name="servers.json")
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(config))

    report = json.loads(succeeded(cli("info", "--json", env=env, cwd=tmp_path)).stdout)
    plain = succeeded(cli("info", env=env, cwd=tmp_path)).stdout

    asks = {t["name"]: t["needs_approval"] for t in report["tools"]}
    assert (asks["add"], asks["send_note"], asks["calculator"]) == (False, True, False)
    assert "send_note (approval)" in plain and "add (approval)" not in plain

"""The MCP listing cache: when a cached listing is not used (a changed entry, an old listing, a
file Ferry did not write, an untrusted servers file), and what a call of a stale tool gets.

Each test lists a real server once (tests/support/servers/mcp_listing.py), closes its session
as a new process would find it, then changes something and reads the server's start log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from graph import build_graph
from graph.storage import sqlite_saver
from tests.support.listings import (
    LISTING,
    V1_TOOLS,
    ListingServer,
    cache_file,
    cached,
    cached_tools,
    configure,
)
from tests.support.mcp import write_config
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call
from tests.support.turns import ask
from tools import TOOLS
from tools.mcp import close_sessions, mcp_tools
from tools.trust import trust

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("mcp_sessions_closed")]


@pytest.fixture
def server(tmp_path: Path) -> ListingServer:
    return ListingServer(tmp_path)


def listed_then_closed(expected: list[str] = V1_TOOLS) -> None:
    """List the servers (starting them, which caches their tools), then close as at exit."""
    assert [t.name for t in mcp_tools()] == expected
    close_sessions()


def results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_calls_of_tools_the_server_changed_are_answered_and_the_listing_refreshed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    # Without `approve: false`, echo would ask once it lost readOnlyHint (test_mcp_approval).
    configure(monkeypatch, tmp_path, {"a": {**server.entry("a"), "approve": False}})
    listed_then_closed()
    server.tools_version("v2")  # echo gains an argument and loses readOnlyHint; gone goes
    offered = mcp_tools()  # still the cached v1 listing: nothing started
    model = ScriptedModel(
        [
            parallel(tool_call("gone"), tool_call("echo", text="hi")),
            tool_call("echo", text="hi", loud=True),
            answer("done"),
        ]
    )
    graph = build_graph(
        model=model, tools=[*TOOLS, *offered], checkpointer=sqlite_saver(tmp_path / "t.db")
    )

    state = ask(graph, "echo hi")

    model.assert_complete()
    gone, changed, loud = results(state)
    assert (gone.name, gone.status) == ("gone", "error")
    assert gone.content.startswith("MCP server 'a' no longer offers the tool 'gone'")
    assert (changed.name, changed.status) == ("echo", "error")
    assert changed.content.startswith(
        "MCP server 'a' changed the tool 'echo' since Ferry listed it, so this call was not run."
    )
    assert '"loud": {"title": "Loud", "type": "boolean"}' in changed.content
    assert (loud.status, loud.content) == ("success", "echo: HI")
    assert server.calls() == ["a echo"]  # only the call made knowing the change ran
    assert server.starts() == ["a", "a"]  # started once, by the first call
    echo = next(t for t in offered if t.name == "echo")
    assert echo.metadata is not None and echo.metadata["retry_safe"] is False  # no hint now
    assert cached_tools("a") == [["echo", "fresh"]]
    close_sessions()
    assert [t.name for t in mcp_tools()] == ["echo", "fresh"]  # the next run's offer
    assert server.starts() == ["a", "a"]


def test_a_cached_server_that_no_longer_starts_is_an_error_then_listed_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    listed_then_closed()
    server.tools_version("fail")
    model = ScriptedModel([tool_call("echo", text="hi"), answer("it failed")])
    graph = build_graph(model=model, checkpointer=sqlite_saver(tmp_path / "t.db"))

    [result] = results(ask(graph, "echo hi"))

    assert result.status == "error"
    assert result.content.startswith("MCP server 'a' did not start: Connection closed")
    assert "this version does not start" in result.content  # its stderr's last line
    assert cached_tools("a") == []  # forgotten: the next run starts it to list its tools
    close_sessions()
    server.tools_version("v1")
    assert [t.name for t in mcp_tools()] == V1_TOOLS
    assert server.starts() == ["a", "a", "a"]


@pytest.mark.parametrize("change", ["args", "env value", "cwd", "script edited"])
def test_a_changed_server_entry_or_program_is_listed_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer, change: str
) -> None:
    script = tmp_path / "listing_server.py"
    shutil.copy(LISTING, script)
    entry = server.entry("a", MCP_TEST_EXTRA="1")
    entry["args"][0] = str(script)
    configure(monkeypatch, tmp_path, {"a": entry})
    listed_then_closed()
    listed_then_closed()
    assert server.starts() == ["a"]  # unchanged: listed from the cache

    if change == "args":
        entry["args"] += ["--flavour", "salty"]
    elif change == "env value":
        entry["env"]["MCP_TEST_EXTRA"] = "2"
    elif change == "cwd":
        (tmp_path / "elsewhere").mkdir()
        entry["cwd"] = str(tmp_path / "elsewhere")
    else:
        with script.open("a", encoding="utf-8") as out:
            out.write("# edited\n")
    configure(monkeypatch, tmp_path, {"a": entry})
    listed_then_closed()

    assert server.starts() == ["a", "a"]
    assert len(cached_tools("a")) == 2  # one listing per fingerprint


def test_a_variable_the_entry_uses_changing_is_a_changed_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    monkeypatch.setenv("MCP_TEST_FLAVOUR", "sweet")
    configure(monkeypatch, tmp_path, {"a": server.entry("a", "--flavour", "${MCP_TEST_FLAVOUR}")})
    listed_then_closed()
    listed_then_closed()
    monkeypatch.setenv("MCP_TEST_FLAVOUR", "sour")
    listed_then_closed()

    assert server.starts() == ["a", "a"]


def test_the_cache_holds_no_secret_and_only_the_user_may_read_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: ListingServer
) -> None:
    token = "tok-" + "7f3a9c" * 4
    configure(monkeypatch, tmp_path, {"a": server.entry("a", MCP_TEST_TOKEN=token)})
    listed_then_closed()

    text = cache_file().read_text(encoding="utf-8")
    assert token not in text and "MCP_TEST_TOKEN" not in text
    assert str(tmp_path) not in text  # no path, no command: a fingerprint and the tools
    assert cache_file().stat().st_mode & 0o777 == 0o600
    assert cache_file().parent.stat().st_mode & 0o777 == 0o700
    [entry] = cached()["servers"].values()
    assert set(entry) == {"server", "listed_at", "tools"}


def _rewrite(change: Any) -> None:
    """Change the cache file's content in place (its owner and mode kept)."""
    data = cached()
    change(data)
    cache_file().write_text(json.dumps(data), encoding="utf-8")


def _age(seconds: float) -> Any:
    def change(data: dict[str, Any]) -> None:
        for entry in data["servers"].values():
            entry["listed_at"] = time.time() - seconds

    return change


@pytest.mark.parametrize(
    ("aged", "used"),
    [(3600.0, True), (25 * 3600.0, False), (-3600.0, False)],
    ids=["an hour old", "over a day old", "from the future"],
)
def test_a_listing_is_used_for_a_day_at_most(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    server: ListingServer,
    aged: float,
    used: bool,
) -> None:
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    listed_then_closed()
    _rewrite(_age(aged))

    listed_then_closed()

    assert server.starts() == (["a"] if used else ["a", "a"])


def _not_json(path: Path) -> None:
    path.write_text('{"version": 1, "servers": {', encoding="utf-8")


def _other_version(path: Path) -> None:
    path.write_text(json.dumps({"version": 2, "servers": {}, "warned": []}), encoding="utf-8")


def _bad_tool(path: Path) -> None:
    _rewrite(lambda data: next(iter(data["servers"].values()))["tools"].append({"name": 3}))


def _code_named(path: Path) -> None:
    _rewrite(lambda data: next(iter(data["servers"].values())).update(module="os.system"))


def _writable_by_others(path: Path) -> None:
    path.chmod(0o666)


def _a_symlink(path: Path) -> None:
    real = path.with_name("elsewhere.json")
    path.rename(real)
    path.symlink_to(real)


@pytest.mark.parametrize(
    "spoil",
    [_not_json, _other_version, _bad_tool, _code_named, _writable_by_others, _a_symlink],
    ids=lambda f: f.__name__.strip("_").replace("_", " "),
)
def test_a_cache_file_ferry_did_not_write_is_ignored_and_rebuilt(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    server: ListingServer,
    caplog: pytest.LogCaptureFixture,
    spoil: Any,
) -> None:
    configure(monkeypatch, tmp_path, {"a": server.entry("a")})
    listed_then_closed()
    spoil(cache_file())

    with caplog.at_level(logging.WARNING, logger="ferry.mcp"):
        listed_then_closed()

    assert server.starts() == ["a", "a"]  # listed again by starting the server
    said = [r.getMessage() for r in caplog.records if "listing cache" in r.getMessage()]
    assert len(said) == 1
    assert said[0].startswith(f"MCP listing cache {cache_file()} ")
    assert said[0].endswith(": ignored, each server lists its tools again")
    assert not cache_file().is_symlink()
    assert cache_file().stat().st_mode & 0o777 == 0o600
    assert cached_tools("a") == [V1_TOOLS[:2] + ["calculator"]]  # rebuilt whole
    listed_then_closed()
    assert server.starts() == ["a", "a"]  # and used again


def test_an_untrusted_folder_servers_file_is_not_used_whatever_is_cached(
    tmp_path: Path, server: ListingServer, capsys: pytest.CaptureFixture[str]
) -> None:
    folder_file = write_config(tmp_path, {"a": server.entry("a")})  # ./mcp.json, cwd
    trust(tmp_path)
    listed_then_closed()
    folder_file.write_text(folder_file.read_text() + "\n")  # same servers, not trusted as it is

    assert mcp_tools() == []

    assert server.starts() == ["a"]
    assert "ignored ./mcp.json (changed since trusted" in capsys.readouterr().err
    assert os.environ.get("FERRY_MCP_CONFIG") is None

"""MCP tools from every entry point: the `ferry` command and `langgraph dev`, on real servers.

The CLI says in one line what went wrong with a server or the file and keeps working; commands
that only read threads start no server; the servers a process started exit with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_helpers import FERRY, Ferry, ferry_env, run_command
from tests.support.langgraph_dev import langgraph_dev
from tests.support.mcp import stdio_entry, write_config
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.trust import trust_folder

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("mcp_sessions_closed")]
EXIT_TIMEOUT_S = 20.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def basic(tmp_path: Path) -> dict[str, object]:
    return stdio_entry(env={"MCP_TEST_STARTS": str(tmp_path / "starts.txt")})


def started(tmp_path: Path) -> list[int]:
    starts = tmp_path / "starts.txt"
    return [int(pid) for pid in starts.read_text().split()] if starts.exists() else []


def running(pid: int) -> bool:
    """Whether the process runs (an exited one its parent has not reaped yet does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_ask_calls_an_mcp_tool_and_a_server_that_fails_is_one_line(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer
) -> None:
    servers = {"basic": basic(tmp_path), "gone": {"command": str(tmp_path / "nowhere")}}
    config = write_config(tmp_path, servers)
    openai.script([openai_tool_calls(("add", {"a": 2, "b": 3})), openai_answer("It is 5.")])
    env = ferry_env(tmp_path, model=openai, FERRY_MCP_CONFIG=str(config))

    done = cli("ask", "2 + 3?", "--json", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["answer"] == "It is 5."
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("add", "success")]
    sent = openai.chat_requests()[0]["tools"]
    assert "add" in [t["function"]["name"] for t in sent]
    about_gone = [line for line in done.stderr.splitlines() if "'gone'" in line]
    assert about_gone == [
        f"warning ferry.mcp: MCP server 'gone' did not start: No such file or directory: "
        f"{tmp_path / 'nowhere'}"
    ]


def test_a_bad_servers_file_is_one_line_naming_it(cli: Ferry, tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"x": {"args": []}}}')
    trust_folder(tmp_path)
    env = ferry_env(tmp_path, FERRY_MODEL="offline")

    done = cli("ask", "what is 2 + 3", env=env, cwd=tmp_path)  # ./mcp.json, found by default

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f'ferry: {tmp_path / "mcp.json"}: mcpServers.x: give "command" (a stdio server) or '
        '"url" (HTTP)'
    ]


def test_reading_threads_starts_no_server_and_ask_stops_its_servers(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(
        tmp_path,
        FERRY_MODEL="offline",
        FERRY_MCP_CONFIG=str(write_config(tmp_path, {"basic": basic(tmp_path)})),
        FERRY_APPROVE_TOOLS="send_note",  # an MCP tool: known only once the server has started
    )
    history = cli("history", "--thread", "nope", env=env, cwd=tmp_path)
    assert history.stderr.strip() == "ferry: unknown thread 'nope' (see `ferry threads`)"
    assert started(tmp_path) == []

    asked = run_command([*FERRY, "ask", "what is 2 + 3", "--json"], env=env, cwd=tmp_path)

    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["tool_calls"][0]["name"] == "calculator"
    [pid] = started(tmp_path)
    assert not running(pid)  # `ferry` closed its session at exit, and the server exited


def test_a_call_without_hints_is_not_run_again_after_a_crash(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    entry = stdio_entry(env={"MCP_TEST_RECORD": str(record)}, approve=False)  # record would ask
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(write_config(tmp_path, {"basic": entry})))
    env["PYTHONPATH"] = str(REPO)
    script = [sys.executable, "-m", "tests.support.mcp_crash"]
    asking = subprocess.Popen([*script, "ask"], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while not (record.exists() and record.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert record.read_text() == "once\n"  # the call reached the server, and hangs there
    finally:
        asking.kill()  # the run dies mid-call
        asking.wait()

    resumed = run_command([*script, "resume"], env=env, cwd=tmp_path)

    assert resumed.returncode == 0, resumed.stderr
    content, status = resumed.stdout.strip().splitlines()
    assert status == "error"
    assert content.startswith("record was cut short by a crash and is not re-run automatically")
    assert record.read_text() == "once\n"  # recorded once, never twice


def test_langgraph_dev_serves_the_mcp_tools(tmp_path: Path, openai: OpenAIServer) -> None:
    config = write_config(tmp_path, {"basic": basic(tmp_path)})
    openai.script([openai_tool_calls(("add", {"a": 20, "b": 22})), openai_answer("42")])
    env = ferry_env(
        tmp_path,
        model=openai,
        FERRY_MCP_CONFIG=str(config),
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
    )
    with langgraph_dev(tmp_path, env) as client:
        thread_id = client.threads.create()["thread_id"]
        values = client.runs.wait(
            thread_id, "agent", input={"messages": [{"role": "user", "content": "20 + 22?"}]}
        )
    assert isinstance(values, dict), values
    tool_results = [m for m in values["messages"] if m["type"] == "tool"]
    assert [(m["name"], m["status"], m["content"]) for m in tool_results] == [
        ("add", "success", "20 + 22 = 42")
    ]
    assert values["messages"][-1]["content"] == "42"
    # One server for the whole server process. uvicorn ends on the SIGTERM it re-raises, so no
    # exit handler runs: the server exits when its stdin closes with the process (MCP's stdio
    # shutdown).
    [pid] = started(tmp_path)
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(pid)


def test_tools_and_info_name_each_tool_s_source_and_each_server_s_state(
    cli: Ferry, tmp_path: Path
) -> None:
    servers = {"basic": basic(tmp_path), "gone": {"command": str(tmp_path / "nowhere")}}
    env = ferry_env(tmp_path, FERRY_MCP_CONFIG=str(write_config(tmp_path, servers)))

    listed = cli("tools", "--json", env=env, cwd=tmp_path)
    info = cli("info", "--json", env=env, cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    sources = {t["name"]: t["source"] for t in json.loads(listed.stdout)["tools"]}
    assert sources["read_file"] == "built-in" and sources["calculator"] == "built-in"
    assert sources["add"] == "mcp:basic" and sources["basic__calculator"] == "mcp:basic"
    add = next(t for t in json.loads(listed.stdout)["tools"] if t["name"] == "add")
    assert add["arguments"] == [
        {"name": "a", "type": "integer", "required": True},
        {"name": "b", "type": "integer", "required": True},
    ]
    assert info.returncode == 0, info.stderr
    report = {s["name"]: s for s in json.loads(info.stdout)["mcp_servers"]}
    assert report["basic"]["status"] == "connected" and "add" in report["basic"]["tools"]
    assert report["gone"]["status"] == "failed" and report["gone"]["tools"] == []
    assert "No such file or directory" in report["gone"]["reason"]
    assert len(started(tmp_path)) == 1  # the in-process CLI: both commands used one session
    text = cli("info", env=env, cwd=tmp_path).stdout
    assert "mcp:        2 servers" in text and "  gone (stdio, failed: No such file" in text

"""MCP servers as Ferry tools, on real servers: FastMCP ones written for the tests, started as
processes over stdio, streamable HTTP and SSE on 127.0.0.1, and servers that fail.

Graphs are built the way users build them (`build_graph()` with `FERRY_MCP_CONFIG`), runs are
scripted, and the assertions are on what users and the model see: the tools bound, the
ToolMessages, the log lines, the stored checkpoints.

`make_agent`'s graphs are on Ferry's saver alone (see `saver` below), and the HTTP servers that
no test stops are shared by the module's tests (`http_servers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from graph import build_graph
from graph.core.log import JsonFormatter, TextFormatter
from graph.core.settings import Settings
from graph.storage import default_saver, sqlite_saver
from tests.support.fixtures import Agent, Scripted
from tests.support.mcp import MALFORMED, http_server, stdio_entry, write_config
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call
from tests.support.turns import ask
from tools import TOOLS
from tools.mcp import loader, mcp_servers, mcp_tools
from tools.settings import ToolSettings, with_tool_settings

BUILT_INS = [t.name for t in TOOLS]
BASIC_TOOLS = ["add", "send_note", "upsert", "basic__calculator", "pid", "secrets"]
BASIC_TOOLS += ["crash", "hang", "huge", "record", "fail"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("mcp_sessions_closed")]


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """Ferry's saver, the one users get, for `make_agent`'s graphs.

    Not also LangGraph's in-memory one, as conftest's would: an MCP tool's call and result
    reach the saver as every tool's do, and the loop's tests run that path on both savers.
    """
    ferry = default_saver(Settings(db=tmp_path / "ferry.db"))
    yield ferry
    ferry.conn.close()


@pytest.fixture(scope="module")
def http_servers() -> Iterator[Callable[[str], str]]:
    """`url(transport)`: the basic server's endpoint over that transport, started at first use.

    Shared by the module's tests that leave it running: each test's sessions to it close at
    the test's end (`mcp_sessions_closed`), as a process's would.
    """
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}

        def url(transport: str) -> str:
            if transport not in urls:
                urls[transport] = stack.enter_context(http_server(transport))
            return urls[transport]

        yield url


@pytest.fixture
def starts(tmp_path: Path) -> Path:
    """The file each start of the basic server appends its pid to."""
    return tmp_path / "starts.txt"


def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = write_config(tmp_path, servers, name="servers.json")
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(path))
    return path


def basic(starts: Path, **entry: Any) -> dict[str, Any]:
    return stdio_entry(env={"MCP_TEST_STARTS": str(starts), **entry.pop("env", {})}, **entry)


def started(starts: Path) -> list[str]:
    return starts.read_text().split() if starts.exists() else []


def results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


class SchemaModel(ScriptedModel):
    """A scripted model that also keeps the tool schemas it was bound with."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        SENT_SCHEMAS[:] = [convert_to_openai_tool(t)["function"] for t in tools]
        return super().bind_tools(tools, **kwargs)


SENT_SCHEMAS: list[dict[str, Any]] = []


@contextlib.contextmanager
def ferry_log(formatter: logging.Formatter) -> Iterator[list[str]]:
    """Ferry's log lines, as its formatter writes them."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(formatter)
    logger = logging.getLogger("ferry")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# --- the tools join the built-in ones -------------------------------------------------------


def test_stdio_tools_join_the_built_ins_and_the_model_gets_their_schemas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, starts: Path
) -> None:
    configure(monkeypatch, tmp_path, {"basic": basic(starts)})
    model = SchemaModel([tool_call("add", a=2, b=3), answer("5")])
    graph = build_graph(model=model, checkpointer=sqlite_saver(tmp_path / "t.db"))

    state = ask(graph, "2 + 3?")

    model.assert_complete()
    assert model.bound_tools == [*BUILT_INS, *BASIC_TOOLS]
    add = next(s for s in SENT_SCHEMAS if s["name"] == "add")
    assert add["description"] == "Add two integers."
    assert add["parameters"]["properties"].keys() == {"a", "b"}
    assert add["parameters"]["required"] == ["a", "b"]
    [result] = results(state)
    assert (result.name, result.status, result.content) == ("add", "success", "2 + 3 = 5")
    assert result.tool_call_id == "call_1"
    assert "2 + 3 = 5" in str(model.calls[1][-1].content)  # fenced for the model


def test_build_graph_with_tools_means_exactly_those(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, starts: Path
) -> None:
    configure(monkeypatch, tmp_path, {"basic": basic(starts)})
    model = ScriptedModel([answer("hi")])
    ask(
        build_graph(model=model, tools=TOOLS[:1], checkpointer=sqlite_saver(tmp_path / "t.db")), "x"
    )
    assert model.bound_tools == [TOOLS[0].name]
    assert started(starts) == []  # no server was started for it


@pytest.mark.parametrize(
    ("transport", "entry"),
    [
        ("streamable-http", {}),  # Cursor's spelling: a url alone
        ("streamable-http", {"type": "http"}),  # Claude Code's
        ("sse", {"type": "sse"}),
        ("sse", {"transport": "sse"}),  # the adapters'
    ],
)
def test_http_and_sse_servers_serve_their_tools(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    http_servers: Callable[[str], str],
    transport: str,
    entry: dict[str, str],
) -> None:
    configure(monkeypatch, tmp_path, {"web": {"url": http_servers(transport), **entry}})
    model = scripted([tool_call("add", a=20, b=22), answer("42")])
    state = ask(make_agent(model), "20 + 22?")
    [info] = mcp_servers()
    [result] = results(state)
    assert (result.status, result.content) == ("success", "20 + 22 = 42")
    expected = "sse" if transport == "sse" else "streamable_http"
    assert (info.name, info.transport, info.status) == ("web", expected, "connected")
    assert "add" in info.tools and "web__calculator" in info.tools


def test_one_session_serves_every_call_and_run_of_the_process(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    configure(monkeypatch, tmp_path, {"basic": basic(starts)})
    twice = parallel(tool_call("pid"), tool_call("pid"))  # duplicate detection applies too
    first = scripted([twice, tool_call("add", a=1, b=2), answer("a")])
    second = scripted([tool_call("pid"), answer("b")])

    # Every MCP tool is outbound and private: under the default outbound rule (`ask`) a call
    # after another's result waits for a person. `allow` holds only quotes: none here.
    one = ask(make_agent(first, exfiltration_guard="allow"), "pid?", thread="t1")
    two = ask(make_agent(second), "pid?", thread="t2")  # another graph, same process

    [pid] = started(starts)
    ran, duplicate, added = results(one)  # in the calls' order, though the refusal came first
    assert [ran.content, added.content, results(two)[0].content] == [pid, "1 + 2 = 3", pid]
    assert duplicate.status == "error"
    assert duplicate.content.startswith("Not executed again: this exact call was already")


def test_colliding_names_are_namespaced_and_said_so(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    configure(monkeypatch, tmp_path, {"a": basic(starts), "b": stdio_entry("b")})
    # The renames are said once a process: as if this test were the first to load these servers.
    monkeypatch.setattr(loader, "_SAID", set())
    model = scripted(
        [tool_call("b__add", a=1, b=1), tool_call("calculator", expression="2*3"), "ok"]
    )
    with ferry_log(TextFormatter()) as lines:
        state = ask(make_agent(model), "go")

    assert model.bound_tools[: len(BUILT_INS)] == BUILT_INS
    assert {"a__add", "b__add", "a__calculator", "b__calculator"} <= set(model.bound_tools)
    assert "add" not in model.bound_tools
    builtin, mcp = results(state)[1], results(state)[0]
    assert (mcp.name, mcp.content) == ("b__add", "1 + 1 = 2")
    assert (builtin.name, builtin.content) == ("calculator", "6")  # the built-in keeps its name
    renamed = [line for line in lines if "renamed" in line]
    assert len(renamed) == 2
    assert renamed[0].startswith(
        "warning ferry.mcp: MCP server 'a': tools renamed (a built-in tool or another server's "
        "has the name, or it is not a valid tool name): add → a__add, send_note → a__send_note"
    )
    assert "calculator → a__calculator" in renamed[0]


# --- the guards apply to them ---------------------------------------------------------------


def test_annotations_and_overrides_reach_the_tools_metadata(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, starts: Path
) -> None:
    override = {"send_note": {"retry_safe": True, "outbound": False}, "add": {"private": False}}
    path = configure(monkeypatch, tmp_path, {"basic": basic(starts, tools=override)})
    meta = {t.name: t.metadata for t in mcp_tools(path)}

    def guards(tool: str) -> tuple[str, bool, bool, bool]:
        m = meta[tool] or {}
        return m["source"], m["retry_safe"], m["outbound"], m["private"]

    # A server's openWorldHint is its own claim: outbound and private unless the config says not.
    assert guards("add") == ("mcp:basic", True, True, False)  # read-only, "closed world"; config
    assert guards("upsert") == ("mcp:basic", True, True, True)  # idempotent, open world
    assert guards("crash") == ("mcp:basic", False, True, True)  # no hint at all
    assert guards("send_note") == ("mcp:basic", True, False, True)  # the config wins
    # Only a tool that declares readOnlyHint runs without a person's approval.
    assert "approval" not in (meta["add"] or {})
    assert (meta["upsert"] or {})["approval"] == (
        "it declares destructiveHint (it may delete or overwrite things)"
    )
    assert (meta["crash"] or {})["approval"] == (
        "it does not declare readOnlyHint (it may change things)"
    )


def test_approve_tools_names_an_mcp_tool_and_the_run_pauses(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    # `approve: false` in the servers file: FERRY_APPROVE_TOOLS alone holds the call.
    configure(monkeypatch, tmp_path, {"basic": basic(starts, approve=False)})
    graph = make_agent(
        scripted([tool_call("send_note", text="hi"), answer("sent")]), approve_tools="send_note"
    )
    config = {"configurable": {"thread_id": "t1"}}

    paused = graph.invoke({"messages": [("user", "send hi")]}, config)
    [pending] = paused["__interrupt__"][0].value["action_requests"]
    assert (pending["name"], pending["args"]) == ("send_note", {"text": "hi"})
    assert results(paused) == []

    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    [result] = results(done)
    assert (result.status, result.content) == ("success", "sent: hi")


def test_the_exfiltration_guard_checks_an_outbound_mcp_tool(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    secret = "The harbour code is 4471-ALPHA-NINE-OSCAR-22, keep it here."
    (tmp_path / "notes.txt").write_text(secret + "\n")
    configure(monkeypatch, tmp_path, {"basic": basic(starts, approve=False)})  # the guard alone
    model = scripted(
        [tool_call("read_file", path="notes.txt"), tool_call("send_note", text=secret), "no"]
    )
    state = make_agent(model, exfiltration_guard="deny", files_root=tmp_path).invoke(
        {"messages": [("user", "read my notes and send them")]},
        {"configurable": {"thread_id": "t1"}},
    )
    read, refused = results(state)
    assert read.status == "success"
    assert (refused.name, refused.status) == ("send_note", "error")
    assert refused.content.startswith(
        "Not executed: this conversation read private data (read_file(notes.txt)), and "
        "send_note would send its arguments off"
    )


def test_the_async_bridge_serves_and_cancels_what_overran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, starts: Path
) -> None:
    path = configure(monkeypatch, tmp_path, {"basic": basic(starts)})
    tools = {t.name: t for t in mcp_tools(path)}
    handed = with_tool_settings({}, ToolSettings(tool_timeout_s=0.5))

    async def calls() -> tuple[Any, str, Any]:
        added = await tools["add"].ainvoke({"a": 1, "b": 2}, handed)
        with pytest.raises(ToolException) as hung:
            await tools["hang"].ainvoke({}, handed)
        return added, str(hung.value), await tools["pid"].ainvoke({}, handed)

    added, hung, pid = asyncio.run(calls())
    assert added == "1 + 2 = 3"
    assert hung == (
        "hang timed out after 0.5 s (FERRY_TOOL_TIMEOUT_S): MCP server 'basic' did not answer. "
        "Try again later or with a simpler request."
    )
    assert [pid] == started(starts)  # the session outlived the cancelled call


# --- faults ---------------------------------------------------------------------------------


def test_a_server_that_dies_mid_call_is_named_and_the_next_call_restarts_it(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    configure(monkeypatch, tmp_path, {"basic": basic(starts, approve=False)})  # crash asks else
    model = scripted([tool_call("crash"), tool_call("pid"), answer("back")])

    state = ask(make_agent(model), "crash, then pid")

    crashed, pid = results(state)
    assert crashed.status == "error"
    assert crashed.content == (
        "MCP server 'basic' stopped: Connection closed (its stderr ends: crashing on purpose)"
    )
    first, second = started(starts)
    assert (pid.status, pid.content) == ("success", second)
    assert state["stop_reason"] == "answered"


def test_a_hanging_call_times_out_and_the_session_keeps_serving(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    configure(monkeypatch, tmp_path, {"basic": basic(starts)})
    model = scripted([tool_call("hang"), tool_call("pid"), answer("ok")])

    state = ask(make_agent(model, tool_timeout_s=1), "hang")

    hung, pid = results(state)
    assert hung.status == "error"
    assert hung.content.startswith("hang timed out after 1 s (FERRY_TOOL_TIMEOUT_S)")
    assert (pid.status, [pid.content]) == ("success", started(starts))  # the same process


def test_malformed_huge_and_failed_results(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    odd = stdio_entry(script=MALFORMED, approve=False)  # its one tool has no hint: it would ask
    configure(monkeypatch, tmp_path, {"basic": basic(starts), "odd": odd})
    model = scripted(
        [tool_call("broken"), tool_call("huge", size=1_500_000), tool_call("fail"), "done"]
    )

    state = ask(make_agent(model, exfiltration_guard="allow"), "go")  # see the one-session test

    broken, huge, failed = results(state)
    assert broken.status == "error"
    assert broken.content.startswith("MCP server 'odd' sent a malformed result: content: ")
    assert huge.status == "success"
    note = "\n[Ferry cut this result: 500,000 of its 1,500,000 characters are not shown.]"
    assert huge.content == "x" * 1_000_000 + note
    assert (failed.status, failed.content) == (
        "error",
        "Error executing tool fail: the ledger is locked",
    )


def test_servers_that_do_not_start_are_left_out_and_the_rest_works(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
) -> None:
    exits = ["-c", "import sys; sys.stderr.write('no settings file\\n'); sys.exit(2)"]
    configure(
        monkeypatch,
        tmp_path,
        {
            "basic": basic(starts),
            "gone": {"command": str(tmp_path / "no-such-server")},
            "exits": {"command": stdio_entry()["command"], "args": exits},
            "unset": {"command": "srv", "env": {"TOKEN": "${MCP_TEST_UNSET_VARIABLE}"}},
        },
    )
    model = scripted([tool_call("add", a=1, b=2), answer("3")])
    with ferry_log(TextFormatter()) as lines:
        state = ask(make_agent(model), "1 + 2?")

    assert [r.content for r in results(state)] == ["1 + 2 = 3"]
    assert model.bound_tools == [*BUILT_INS, *BASIC_TOOLS]
    # Sorted: the servers fail in an order of their own.
    exited, *failed = sorted(line for line in lines if "did not start" in line)
    # A server that exits at once is seen by the read of its reply, or by Ferry's first write
    # when it is gone before that: either way it says the connection closed.
    assert exited == (
        "warning ferry.mcp: MCP server 'exits' did not start: Connection closed (its stderr "
        "ends: no settings file)"
    )
    assert failed == [
        f"warning ferry.mcp: MCP server 'gone' did not start: No such file or directory: "
        f"{tmp_path / 'no-such-server'}",
        "warning ferry.mcp: MCP server 'unset' did not start: MCP_TEST_UNSET_VARIABLE not set "
        "(used in the MCP servers file)",
    ]
    status = {s.name: (s.status, s.tools) for s in mcp_servers()}
    assert status["basic"] == ("connected", tuple(BASIC_TOOLS))
    assert status["gone"] == ("failed", ())


# --- secrets --------------------------------------------------------------------------------


def test_env_and_header_secrets_reach_neither_logs_nor_checkpoints(
    scripted: Scripted,
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    starts: Path,
    http_servers: Callable[[str], str],
) -> None:
    token, bearer = f"env-{uuid.uuid4().hex}", f"hdr-{uuid.uuid4().hex}"
    leaks = ["-c", "import os, sys; sys.stderr.write(os.environ['LEAKY'] + '\\n'); sys.exit(1)"]
    db = tmp_path / "t.db"
    configure(
        monkeypatch,
        tmp_path,
        {
            "basic": basic(starts, env={"MCP_TEST_TOKEN": token}),
            "web": {
                "url": http_servers("streamable-http"),
                "headers": {"Authorization": f"Bearer {bearer}"},
            },
            "leaky": {
                "command": stdio_entry()["command"],
                "args": leaks,
                "env": {"LEAKY": token},
            },
        },
    )
    model = scripted([parallel(tool_call("basic__secrets"), tool_call("web__secrets")), "ok"])
    with ferry_log(JsonFormatter()) as json_lines, ferry_log(TextFormatter()) as text_lines:
        graph = make_agent(model, checkpointer=sqlite_saver(db))
        state = ask(graph, "what were you given?")

    from_env, from_header = results(state)
    assert from_env.content == "env=[redacted] header="  # the server got it; Ferry hid it
    assert from_header.content == "env= header=[redacted]"  # the whole header value
    [leaky] = [line for line in text_lines if "'leaky' did not start" in line]
    # Why it failed depends on which end of its pipes saw it exit first ("Connection closed",
    # or a write that broke); what its stderr said is shown, its secret hidden.
    assert leaky.startswith("warning ferry.mcp: MCP server 'leaky' did not start: "), leaky
    assert leaky.endswith(" (its stderr ends: [redacted])"), leaky
    stored = [
        repr(t.checkpoint) + repr(t.pending_writes) + repr(t.metadata)
        for t in sqlite_saver(db).list({"configurable": {"thread_id": "t1"}})
    ]
    everything = "\n".join([*json_lines, *text_lines, *stored])
    assert stored and json_lines
    assert token not in everything and bearer not in everything
    assert token.encode() not in db.read_bytes() and bearer.encode() not in db.read_bytes()


def test_the_settings_object_points_at_the_file(tmp_path: Path, starts: Path) -> None:
    path = write_config(tmp_path, {"basic": basic(starts)}, name="elsewhere.json")
    model = ScriptedModel()
    build_graph(
        model=model,
        checkpointer=sqlite_saver(tmp_path / "t.db"),
        settings=Settings(mcp_config=path),
    )
    assert len(started(starts)) == 1


# --- servers that hang at start, or go away between calls ------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_server_that_hangs_at_start_is_left_out_in_time_and_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, starts: Path
) -> None:
    pid_file = tmp_path / "hung.pid"
    hangs = [
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)",
    ]
    path = configure(
        monkeypatch,
        tmp_path,
        {"basic": basic(starts), "hangs": {"command": stdio_entry()["command"], "args": hangs}},
    )
    # The basic server is started first, however long a busy machine takes (the same entry
    # reuses its session): the 1 s below is the hung server's alone, which never answers.
    alone = write_config(tmp_path, {"basic": basic(starts)}, name="basic.json")
    assert [t.name for t in mcp_tools(alone, start_timeout_s=60)] == BASIC_TOOLS
    with ferry_log(TextFormatter()) as lines:
        began = time.monotonic()
        tools = mcp_tools(path, start_timeout_s=1)
        waited = time.monotonic() - began

    assert [t.name for t in tools] == BASIC_TOOLS  # the other server's tools are there
    assert waited < 15, f"gave up after {waited:.1f} s"
    assert "warning ferry.mcp: MCP server 'hangs' did not start: no answer within 1 s" in lines
    status = {s.name: (s.status, s.reason) for s in mcp_servers(path, start_timeout_s=1)}
    assert status["hangs"] == ("failed", "no answer within 1 s")
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:  # the hung process is not left behind
        time.sleep(0.1)
    assert not _alive(pid)


def test_an_http_server_that_goes_away_is_named_and_the_run_goes_on(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = scripted(
        [tool_call("add", a=1, b=2), answer("3"), tool_call("add", a=2, b=2), answer("gone")]
    )
    with http_server("streamable-http") as url:
        configure(monkeypatch, tmp_path, {"web": {"url": url}})
        agent = make_agent(model, exfiltration_guard="allow")  # see the one-session test
        first = ask(agent, "1 + 2?")
    # The server has exited; the session that reached it is still open in this process.
    state = ask(agent, "2 + 2?")

    assert [r.content for r in results(first)] == ["1 + 2 = 3"]
    gone = results(state)[-1]
    assert gone.status == "error"
    assert gone.content.startswith("MCP server 'web' stopped: "), gone.content
    assert state["stop_reason"] == "answered"
    [info] = mcp_servers()  # reported as stopped, with why (the error text is httpx's)
    assert info.status == "stopped" and gone.content.endswith(info.reason)

"""Threads in PostgreSQL (`FERRY_DATABASE_URL`): the loop, resume, the CLI, growth, concurrency.

One real server runs for the session, on a free loopback port in a temporary folder
(`tests/pgserver.py`); each test gets a database of its own. Without a PostgreSQL installation
the tests that need a server skip, saying why (`.ci/run` installs one, so CI runs them).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from graph.core.fence import fenced_data
from graph.core.settings import Settings
from graph.guards import turn_counters
from graph.models import ConfigError
from graph.storage.codec.serde import StoredValueError
from graph.storage.postgres.saver import FerryPostgresSaver, open_postgres_saver
from graph.storage.stores import open_store
from graph.storage.threads.reading import list_threads
from tests.support.cli_helpers import (
    Ferry,
    ferry_env,
    history,
    one_json_object,
    roles,
    succeeded,
)
from tests.support.fixtures import Agent, Scripted
from tests.support.growth import bytes_per_turn, postgres_stored_bytes
from tests.support.hostile_rows import PLANTED_MODULE, hostile_values, plant_module
from tests.support.pgserver import PostgresServer
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """An empty database of this test's own."""
    return postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def saver(database_url: str) -> Iterator[FerryPostgresSaver]:
    with open_postgres_saver(database_url) as opened:
        yield opened


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend.
        b: second addend.
    """
    return a + b


@tool
def shout(text: str) -> str:
    """Repeat a text in capitals.

    Args:
        text: what to repeat.
    """
    return text.upper()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [add, shout]


def kinds(messages: list[Any]) -> list[str]:
    return [type(m).__name__.removesuffix("Message") for m in messages]


# --- the loop on a Postgres saver -----------------------------------------------------------


def test_parallel_calls_then_a_second_turn_that_sees_the_first(
    scripted: Scripted, make_agent: Agent, saver: FerryPostgresSaver, database_url: str
) -> None:
    model = scripted(
        [
            parallel(tool_call("add", a=2, b=3), tool_call("shout", text="hi")),
            answer("5, and HI"),
            tool_call("add", a=5, b=10),
            answer("15"),
        ]
    )
    graph = make_agent(model, saver)
    config = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"messages": [("user", "2+3, and shout hi")]}, config)
    assert first["stop_reason"] == "answered"
    assert kinds(first["messages"]) == ["Human", "AI", "Tool", "Tool", "AI"]
    results = {m.tool_call_id: m.content for m in first["messages"][2:4]}
    assert results == {"call_1": "5", "call_2": "HI"}

    second = graph.invoke({"messages": [("user", "and plus 10?")]}, config)
    assert second["stop_reason"] == "answered"
    assert kinds(second["messages"]) == ["Human", "AI", "Tool", "Tool", "AI"] + [
        "Human", "AI", "Tool", "AI"
    ]  # fmt: skip
    assert second["messages"][-1].content == "15"
    sent = [m.content for m in model.calls[2] if isinstance(m, ToolMessage)]
    assert [fenced_data(str(text)) for text in sent] == ["5", "HI"]

    with open_postgres_saver(database_url) as other:  # another process's view of the thread
        stored = make_agent(ScriptedModel(), other).get_state(config).values["messages"]
    assert [(m.id, m.content) for m in stored] == [(m.id, m.content) for m in second["messages"]]


def test_a_run_stopped_before_its_tools_resumes_from_a_new_saver(
    scripted: Scripted, make_agent: Agent, database_url: str
) -> None:
    config = {"configurable": {"thread_id": "crashy"}}
    with open_postgres_saver(database_url) as first:
        graph = make_agent(ScriptedModel([tool_call("add", a=150, b=300)]), first)
        graph.invoke(
            {"messages": [("user", "150 + 300?")]}, config, interrupt_before=["execute_tool"]
        )
        assert graph.get_state(config).next == ("execute_tool",)

    with open_postgres_saver(database_url) as second:
        model = scripted([answer("450")])
        result = make_agent(model, second).invoke(None, config)
    assert result["stop_reason"] == "answered"
    assert kinds(result["messages"]) == ["Human", "AI", "Tool", "AI"]
    assert result["messages"][2].content == "450"


def test_the_iteration_guard_counts_across_a_resume(
    scripted: Scripted, make_agent: Agent, database_url: str
) -> None:
    config = {"configurable": {"thread_id": "guarded"}}
    with open_postgres_saver(database_url) as first:
        graph = make_agent(ScriptedModel([tool_call("add", a=1, b=1)]), first, max_iterations=2)
        graph.invoke({"messages": [("user", "loop")]}, config, interrupt_before=["execute_tool"])
    with open_postgres_saver(database_url) as second:
        model = scripted([tool_call("add", a=2, b=2)])  # the second and last call allowed
        result = make_agent(model, second, max_iterations=2).invoke(None, config)
    assert result["stop_reason"] == "max_iterations"
    assert turn_counters(result["messages"])["model_calls"] == 2


def test_a_crash_inside_a_side_effect_is_resumed_without_repeating_it(
    database_url: str, tmp_path: Path
) -> None:
    """A real crash (the process dies mid-tool); `build_graph()` finds Postgres by itself."""
    log = tmp_path / "payments.log"
    env = {**ferry_env(tmp_path), "PYTHONPATH": str(REPO), "FERRY_DATABASE_URL": database_url}

    def run(step: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.support.payment", str(log), step],
            env={**env, **extra}, cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    assert run("ask", CRASH_AFTER_PAYING="1").returncode == 9
    resumed = run("resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip().splitlines()[-1] == "error"
    assert log.read_text() == "paid 5\n"
    assert not (tmp_path / "ferry.db").exists()


def test_the_server_factory_and_the_cli_share_threads(
    make_agent: Agent, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph.server.checkpointer import checkpointer

    monkeypatch.setenv("FERRY_DATABASE_URL", database_url)
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}

    async def run_on_the_server() -> None:
        async with checkpointer() as server_saver:
            model = ScriptedModel([tool_call("add", a=1, b=2), answer("3")])
            await make_agent(model, server_saver).ainvoke({"messages": [("user", "1+2?")]}, config)

    asyncio.run(run_on_the_server())
    with open_postgres_saver(database_url) as cli_saver:
        model = ScriptedModel([answer("6")])
        result = make_agent(model, cli_saver).invoke({"messages": [("user", "doubled?")]}, config)
        assert [t["messages"] for t in list_threads(cli_saver)] == [6]
    assert kinds(result["messages"]) == ["Human", "AI", "Tool", "AI", "Human", "AI"]


def test_the_servers_saver_lists_threads_as_the_clis_does(
    make_agent: Agent, database_url: str
) -> None:
    from graph.state import fold_messages
    from graph.storage.postgres.saver import async_postgres_saver

    config = {"configurable": {"thread_id": "t1"}}
    with open_postgres_saver(database_url) as cli_saver:
        graph = make_agent(ScriptedModel([answer("hello")]), cli_saver)
        graph.invoke({"messages": [("user", "hi")]}, config)
        listed = list_threads(cli_saver)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM ferry_thread_summaries")  # the listing rebuilds and stores it

    async def on_the_server() -> tuple[list[Any], list[str]]:
        async with async_postgres_saver(database_url, fold=fold_messages) as saver:
            with pytest.raises(asyncio.InvalidStateError):
                saver.thread_summaries()  # on the saver's own loop it must be awaited
            threads = await asyncio.to_thread(list_threads, saver)
            cutoff = datetime(2999, 1, 1, tzinfo=UTC)
            return threads, await asyncio.to_thread(saver.threads_updated_before, cutoff)

    threads, older = asyncio.run(on_the_server())
    assert threads == listed and [t["messages"] for t in threads] == [2] and older == ["t1"]
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT thread_id, messages FROM ferry_thread_summaries").fetchall()
    assert stored == [("t1", 2)]


class FakeThreads:
    """The part of the SDK's threads client the registry sync uses, over a dict."""

    def __init__(self, registry: dict[str, dict[str, Any]]) -> None:
        self.registry = registry

    async def search(self, *, limit: int, offset: int, select: list[str]) -> list[Any]:
        return list(self.registry.values())[offset : offset + limit]

    async def create(self, *, thread_id: str, if_exists: str, graph_id: str) -> None:
        self.registry.setdefault(
            thread_id,
            {"thread_id": thread_id, "metadata": {"graph_id": graph_id}, "status": "idle"},
        )

    async def delete(self, thread_id: str) -> None:
        del self.registry[thread_id]


def test_studio_registers_the_threads_stored_in_postgres_and_keeps_them(
    make_agent: Agent, database_url: str
) -> None:
    from graph.server.registry import RegistrySync

    stored, stale = str(uuid.uuid4()), str(uuid.uuid4())
    with open_postgres_saver(database_url) as saver:
        make_agent(ScriptedModel([answer("hi")]), saver).invoke(
            {"messages": [("user", "hello")]}, {"configurable": {"thread_id": stored}}
        )
    registry = {stale: {"thread_id": stale, "metadata": {"graph_id": "agent"}, "status": "idle"}}
    client: Any = type("Client", (), {"threads": FakeThreads(registry)})()
    sync = RegistrySync(client, Path("no-such.db"), database_url)
    asyncio.run(sync.sync())
    assert set(registry) == {stored}  # registered; the entry without checkpoints dropped
    asyncio.run(sync.sync())
    assert set(registry) == {stored}


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_ask_history_threads_and_delete(cli: Ferry, database_url: str, tmp_path: Path) -> None:
    env = ferry_env(tmp_path, FERRY_DATABASE_URL=database_url, FERRY_MODEL="offline")
    report = one_json_object(cli("ask", "What is 150 * 3?", "--json", env=env, cwd=tmp_path))
    assert report["stop_reason"] == "answered" and "450" in report["answer"]
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("calculator", "success")]
    thread_id = report["thread_id"]

    follow_up = cli(
        "ask", "What is 450 / 9?", "--thread", thread_id, "--json", env=env, cwd=tmp_path
    )
    assert "50" in one_json_object(follow_up)["answer"]
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"] * 2
    assert messages[2]["content"] == "450"

    threads = one_json_object(cli("threads", "--json", env=env, cwd=tmp_path))["threads"]
    assert [(t["thread_id"], t["messages"]) for t in threads] == [(thread_id, 8)]

    deleted = one_json_object(cli("delete", "--thread", thread_id, "--json", env=env, cwd=tmp_path))
    assert deleted["deleted"] == [thread_id] and deleted["db_bytes"] > 0
    assert one_json_object(cli("threads", "--json", env=env, cwd=tmp_path)) == {"threads": []}
    assert not (tmp_path / "ferry.db").exists()  # nothing went to SQLite


def test_cli_prune_before_works_and_keep_says_it_is_sqlite_only(
    cli: Ferry, database_url: str, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path, FERRY_DATABASE_URL=database_url, FERRY_MODEL="offline")
    succeeded(cli("ask", "What is 2 * 3?", "--json", env=env, cwd=tmp_path))
    keep = cli("prune", "--keep", "3", env=env, cwd=tmp_path)
    assert keep.returncode == 1
    assert keep.stderr == (
        "ferry: prune --keep works on SQLite only; with FERRY_DATABASE_URL use --before DATE\n"
    )
    report = one_json_object(
        cli("prune", "--before", "2999-01-01", "--json", env=env, cwd=tmp_path)
    )
    assert len(report["threads_deleted"]) == 1
    assert one_json_object(cli("threads", "--json", env=env, cwd=tmp_path)) == {"threads": []}


def test_cli_reports_an_unreachable_server_in_one_line(cli: Ferry, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"postgresql://ferry:secret-password@127.0.0.1:{s.getsockname()[1]}/ferry"
        env = ferry_env(tmp_path, FERRY_DATABASE_URL=url)
        done = cli("threads", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("ferry: cannot connect to Postgres (FERRY_DATABASE_URL): ")
    assert done.stderr.count("\n") == 1 and "Connection refused" in done.stderr
    assert "secret-password" not in done.stderr


def test_a_missing_postgres_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from graph.storage import open_saver

    monkeypatch.delitem(sys.modules, "graph.storage.postgres.saver")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an install without the extra has
    with pytest.raises(ConfigError, match=r"pip install 'ferry-agent\[postgres\]'"):
        with open_saver(Settings(database_url="postgresql://127.0.0.1/ferry")):
            pass


# --- storage grows linearly ------------------------------------------------------------------

ROUNDS = 3  # tool calls per turn, one after the other
EARLY, LATE, SPAN = 5, 40, 5  # growth is averaged over SPAN turns after EARLY and after LATE


def test_bytes_per_turn_do_not_grow_with_the_thread(
    scripted: Scripted, make_agent: Agent, saver: FerryPostgresSaver, database_url: str
) -> None:
    turns = LATE + SPAN
    steps: list[AIMessage | str] = []
    for turn in range(1, turns + 1):
        steps += [tool_call("shout", text=f"record {turn}.{i} " * 60) for i in range(ROUNDS)]
        steps.append(answer(f"Summary of question {turn}."))
    model = scripted(steps)
    graph = make_agent(model, saver, max_iterations=50)
    early, late, result = bytes_per_turn(
        graph, lambda: postgres_stored_bytes(database_url), early=EARLY, late=LATE, span=SPAN
    )
    assert len(result["messages"]) == turns * (2 + 2 * ROUNDS)
    assert late <= 1.5 * early, (
        f"a turn adds {late:.0f} B at turn ~{LATE}, {early:.0f} B at ~{EARLY}"
    )


# --- several processes at once ---------------------------------------------------------------

WRITERS, TURNS = 4, 3
WRITER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from graph import build_graph

    index, go = int(sys.argv[1]), Path(sys.argv[2])
    while not go.exists():  # start together, on a database nobody has set up yet
        time.sleep(0.01)
    graph = build_graph()
    config = {"configurable": {"thread_id": f"writer-{index}"}}
    for turn in range(1, int(sys.argv[3]) + 1):
        question = f"What is {index * 100 + turn} * 3?"
        result = graph.invoke({"messages": [("user", question)]}, config)
        assert result["stop_reason"] == "answered", result
    """
)


def test_several_processes_write_their_threads_at_once(
    make_agent: Agent, database_url: str, tmp_path: Path
) -> None:
    script, go = tmp_path / "writer.py", tmp_path / "go"
    script.write_text(WRITER_SCRIPT)
    env = {
        **ferry_env(tmp_path, FERRY_DATABASE_URL=database_url, FERRY_MODEL="offline"),
        "PYTHONPATH": str(REPO),
    }
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), str(go), str(TURNS)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(WRITERS)
    ]
    time.sleep(1.0)  # let them import and wait at the line
    go.touch()
    outcomes = [w.communicate(timeout=120) for w in writers]
    assert [w.returncode for w in writers] == [0] * WRITERS, outcomes
    assert all(err == "" for _, err in outcomes), outcomes

    with open_postgres_saver(database_url) as reader:
        threads = {t["thread_id"]: t["messages"] for t in list_threads(reader)}
        assert threads == {f"writer-{i}": 4 * TURNS for i in range(WRITERS)}
        for i in range(WRITERS):
            config = {"configurable": {"thread_id": f"writer-{i}"}}
            messages = make_agent(ScriptedModel(), reader).get_state(config).values["messages"]
            asked = [m.content for m in messages if isinstance(m, HumanMessage)]
            assert asked == [f"What is {i * 100 + t} * 3?" for t in range(1, TURNS + 1)]
            answers = [m.content for m in messages[3::4]]
            assert answers == [
                f"`{i * 100 + t} * 3` = {(i * 100 + t) * 3}" for t in range(1, TURNS + 1)
            ]


# --- a database someone else can write ----------------------------------------------------------


def test_stores_set_up_at_once_on_a_new_database_each_find_their_tables(database_url: str) -> None:
    # LangGraph's store setup reads its migration, then applies the next: without Ferry's setup
    # lock, two at once both apply the first and one fails on `store_migrations_pkey`.
    start = threading.Barrier(WRITERS)

    def open_and_put(index: int) -> None:
        start.wait()
        with open_store(Path("unused.db"), database_url) as store:
            store.put(("memories",), f"key-{index}", {"text": f"memory {index}"})

    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(open_and_put, range(WRITERS)))
    with open_store(Path("unused.db"), database_url) as store:
        found = {item.key for item in store.search(("memories",), limit=10)}
    assert found == {f"key-{i}" for i in range(WRITERS)}


def _plant_in_postgres(url: str, thread: str, value: tuple[str, bytes]) -> None:
    """Replace every stored message value of `thread` (writes and channel blobs) with `value`."""
    with psycopg.connect(url, autocommit=True) as conn:
        writes = conn.execute(
            "UPDATE checkpoint_writes SET type = %s, blob = %s "
            "WHERE thread_id = %s AND channel = 'messages'",
            (*value, thread),
        ).rowcount
        blobs = conn.execute(
            "UPDATE checkpoint_blobs SET type = %s, blob = %s "
            "WHERE thread_id = %s AND channel = 'messages'",
            (*value, thread),
        ).rowcount
        # Its summary too, so that the listing reads the thread, as one from before them.
        conn.execute("DELETE FROM ferry_thread_summaries WHERE thread_id = %s", (thread,))
    assert writes + blobs


@pytest.mark.parametrize(
    "payload",
    ["os.system", "subprocess", "importlib", "pickle", "json lc2 envelope", "nested in a message"],
)
def test_a_planted_row_runs_nothing_through_the_sync_and_async_savers(
    make_agent: Agent,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    payload: str,
) -> None:
    from graph.server.checkpointer import checkpointer

    marker = tmp_path / "code-ran"
    plant_module(tmp_path, marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FERRY_DATABASE_URL", database_url)
    with open_postgres_saver(database_url) as saver:
        graph = make_agent(ScriptedModel([answer("hello good"), answer("hello bad")]), saver)
        for thread in ("good", "bad"):
            graph.invoke(
                {"messages": [("user", f"hi {thread}")]}, {"configurable": {"thread_id": thread}}
            )
    _plant_in_postgres(database_url, "bad", hostile_values(marker)[payload])
    with open_postgres_saver(database_url) as saver:
        graph = make_agent(ScriptedModel([]), saver)
        with pytest.raises(StoredValueError, match="^thread bad: "):
            graph.get_state({"configurable": {"thread_id": "bad"}})
        assert [t["thread_id"] for t in list_threads(saver)] == ["good"]

    async def read_on_the_server() -> None:
        async with checkpointer() as server_saver:
            graph = make_agent(ScriptedModel([]), server_saver)
            with pytest.raises(StoredValueError, match="^thread bad: "):
                await graph.aget_state({"configurable": {"thread_id": "bad"}})
            good = await graph.aget_state({"configurable": {"thread_id": "good"}})
            assert [m.content for m in good.values["messages"]] == ["hi good", "hello good"]

    asyncio.run(read_on_the_server())
    assert not marker.exists()
    assert PLANTED_MODULE not in sys.modules


def test_with_a_key_no_conversation_text_is_readable_in_postgres(
    make_agent: Agent, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "0123456789abcdef0123456789abcdef")
    with open_postgres_saver(database_url) as saver:
        graph = make_agent(
            ScriptedModel([tool_call("shout", text="confidential plans"), answer("OK")]), saver
        )
        graph.invoke(
            {"messages": [("user", "shout confidential plans")]},
            {"configurable": {"thread_id": "t"}},
        )
        assert [t["messages"] for t in list_threads(saver)] == [4]
    with psycopg.connect(database_url, autocommit=True) as conn:
        dump = "".join(
            str(row)
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
            for row in conn.execute(f"SELECT * FROM {table}").fetchall()
        )
    assert "confidential" not in dump.lower() and "CONFIDENTIAL" not in dump
    assert "+aes" in dump
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "another key of 32 characters!!!!")
    with open_postgres_saver(database_url) as saver:
        with pytest.raises(StoredValueError, match="^thread t: cannot decrypt"):
            make_agent(ScriptedModel([]), saver).get_state({"configurable": {"thread_id": "t"}})

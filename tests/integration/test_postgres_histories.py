"""Postgres keeps what SQLite keeps: a saved history per thread, and a summary row per thread.

A new process reads a long thread from its saved history and the writes after it, not from
the thread's start; the result is what replaying every write gives. `ferry threads` reads the
summary rows and rebuilds nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver

import graph.storage.pg_history as pg
from graph.state import fold_messages
from graph.storage.internals import snapshot_value
from graph.storage.postgres import async_postgres_saver, open_postgres_saver
from graph.storage.threads import list_threads
from tests.support.pgserver import PostgresServer
from tests.support.scripted import ScriptedModel, answer, tool_call

pytestmark = pytest.mark.timeout(300)
TURNS = 60  # 240 messages: the history is saved at 200, a cold read replays the last 40
THREAD: Any = {"configurable": {"thread_id": "long"}}


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}: " + "lorem ipsum " * 20


@pytest.fixture(scope="module")
def database_url(postgres_server: PostgresServer) -> str:
    """A database holding one long thread and one short one."""
    url = postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")
    from graph import build_graph

    steps: list[Any] = []
    for turn in range(TURNS + 1):
        steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    with open_postgres_saver(url) as saver:
        agent = build_graph(model=ScriptedModel(steps), tools=[lookup], checkpointer=saver)
        for turn in range(TURNS):
            agent.invoke({"messages": [("user", f"question {turn}")]}, THREAD)
        short = {"configurable": {"thread_id": "short"}}
        agent.invoke({"messages": [("user", "short one")]}, short)
    return url


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """(checkpoints walked, write rows read) of each rebuild."""
    seen: list[tuple[int, int]] = []
    replayed = pg.replayed

    def spy(chain: list[str], seed: Any, rows: Any, serde: Any) -> Any:
        seen.append((len(chain), len(rows)))
        return replayed(chain, seed, rows, serde)

    monkeypatch.setattr(pg, "replayed", spy)
    yield seen


def _from_the_start(url: str, config: Any) -> list[Any]:
    """The messages as LangGraph's own saver replays them, from the thread's start."""
    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        with open_postgres_saver(url) as ferry:
            stock = PostgresSaver(conn, serde=ferry.serde)
            entry = stock.get_delta_channel_history(config=config, channels=["messages"])
    history = entry["messages"]
    return fold_messages(snapshot_value(history.get("seed")), [v for _, _, v in history["writes"]])


def _message_write_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM checkpoint_writes "
            "WHERE thread_id = 'long' AND channel = 'messages'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_new_saver_reads_a_long_thread_from_its_saved_history(
    database_url: str, replays: list[tuple[int, int]]
) -> None:
    with psycopg.connect(database_url) as conn:
        saved = conn.execute("SELECT thread_id, messages FROM ferry_histories").fetchall()
    assert saved == [("long", 200)]

    with open_postgres_saver(database_url) as saver:
        cold = saver.get_delta_channel_history(config=THREAD, channels=["messages"])
    messages = cold["messages"]["seed"]

    assert messages == _from_the_start(database_url, THREAD)
    assert len(messages) == 4 * TURNS
    [(walked, rows)] = replays
    assert rows < _message_write_rows(database_url) / 5  # the 40 messages after the save
    assert walked < 4 * 40


def test_an_older_checkpoint_reads_as_replaying_from_the_start_gives(database_url: str) -> None:
    with open_postgres_saver(database_url) as saver:
        older = list(saver.list(THREAD, limit=90))[-1].config
        cold = saver.get_delta_channel_history(config=older, channels=["messages"])
    assert cold["messages"]["seed"] == _from_the_start(database_url, older)


def test_the_servers_saver_reads_it_the_same_way(
    database_url: str, replays: list[tuple[int, int]]
) -> None:
    async def read() -> list[Any]:
        async with async_postgres_saver(database_url) as saver:
            cold = await saver.aget_delta_channel_history(config=THREAD, channels=["messages"])
            return list(cold["messages"]["seed"])

    assert asyncio.run(read()) == _from_the_start(database_url, THREAD)
    [(_, rows)] = replays
    assert rows < _message_write_rows(database_url) / 5


def test_the_listing_reads_the_summaries_and_delete_removes_ferrys_rows(
    database_url: str, replays: list[tuple[int, int]]
) -> None:
    with open_postgres_saver(database_url) as saver:
        listed = list_threads(saver)
        assert [(t["thread_id"], t["messages"], t["title"]) for t in listed] == [
            ("short", 4, "short one"),
            ("long", 4 * TURNS, "question 0"),
        ]
        assert replays == []  # nothing rebuilt
        saver.delete_thread("short")
        assert [t["thread_id"] for t in list_threads(saver)] == ["long"]
    with psycopg.connect(database_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM ferry_thread_summaries WHERE thread_id = 'short'"
        ).fetchone()
    assert left == (0,)

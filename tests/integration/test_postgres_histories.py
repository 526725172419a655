"""Postgres keeps what SQLite keeps: a stored history per thread, and a summary row per thread.

A new process reads a long thread from its stored history and the writes after it, not from
the thread's start; the result is what replaying every write gives. `ferry threads` reads the
summary rows and rebuilds nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from graph.state import fold_messages
from graph.storage.postgres.saver import async_postgres_saver, open_postgres_saver
from graph.storage.threads.reading import list_threads
from tests.support.pg_threads import THREAD, from_the_start, run, scripted_agent
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(300)
TURNS = 60  # 240 messages: the history is saved at 200, a cold read replays the last 40


@pytest.fixture(scope="module")
def database_url(postgres_server: PostgresServer) -> str:
    """A database holding one long thread and one short one."""
    url = postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")
    with open_postgres_saver(url, fold=fold_messages) as saver:
        agent = scripted_agent(saver, range(TURNS + 1))
        run(agent, range(TURNS))
        short = {"configurable": {"thread_id": "short"}}
        agent.invoke({"messages": [("user", "short one")]}, short)
    return url


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

    with open_postgres_saver(database_url, fold=fold_messages) as saver:
        cold = saver.get_delta_channel_history(config=THREAD, channels=["messages"])
    messages = cold["messages"]["seed"]

    assert messages == from_the_start(database_url, THREAD)
    assert len(messages) == 4 * TURNS
    [(walked, rows)] = replays
    assert rows < _message_write_rows(database_url) / 5  # the 40 messages after the save
    assert walked < 4 * 40


def test_an_older_checkpoint_reads_as_replaying_from_the_start_gives(database_url: str) -> None:
    with open_postgres_saver(database_url, fold=fold_messages) as saver:
        older = list(saver.list(THREAD, limit=90))[-1].config
        cold = saver.get_delta_channel_history(config=older, channels=["messages"])
    assert cold["messages"]["seed"] == from_the_start(database_url, older)


def test_the_servers_saver_reads_it_the_same_way(
    database_url: str, replays: list[tuple[int, int]]
) -> None:
    async def read() -> list[Any]:
        async with async_postgres_saver(database_url, fold=fold_messages) as saver:
            cold = await saver.aget_delta_channel_history(config=THREAD, channels=["messages"])
            return list(cold["messages"]["seed"])

    assert asyncio.run(read()) == from_the_start(database_url, THREAD)
    [(_, rows)] = replays
    assert rows < _message_write_rows(database_url) / 5


def test_the_listing_reads_the_summaries_and_delete_removes_ferrys_rows(
    database_url: str, replays: list[tuple[int, int]]
) -> None:
    with open_postgres_saver(database_url, fold=fold_messages) as saver:
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

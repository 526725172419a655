"""Postgres extends a thread's stored history by parts, as SQLite does, never copying it again.

A new process then replays fewer than `PART` messages' writes after the newest
part; what it reads is what replaying every write gives, from the sync saver and the server's.
A part that does not fit the base is passed over, a fork appends none, a delete leaves none.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from graph.state import fold_messages
from graph.storage.history.messages import PART
from graph.storage.postgres.saver import async_postgres_saver, open_postgres_saver
from tests.support.pg_threads import THREAD, from_the_start, run, scripted_agent
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(300)
TURNS = 80  # 320 messages: a base at 200, then parts of 32 or a little more
PER_TURN = 4  # question, call, result, answer


@pytest.fixture(scope="module")
def grown(postgres_server: PostgresServer) -> str:
    """The name of a database holding one thread of `TURNS` turns, grown by one process."""
    name = f"grown_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name)
    with open_postgres_saver(url, fold=fold_messages) as saver:
        run(scripted_agent(saver, range(TURNS)), range(TURNS))
    return name


@pytest.fixture
def url(postgres_server: PostgresServer, grown: str) -> str:
    """A copy of `grown` of the test's own (Postgres copies a database in milliseconds)."""
    return postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}", template=grown)


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def _base(url: str) -> list[tuple[Any, ...]]:
    return _rows(url, "SELECT thread_id, checkpoint_id, messages FROM ferry_histories")


def _parts(url: str) -> list[tuple[Any, ...]]:
    return _rows(url, "SELECT messages, checkpoint_id FROM ferry_history_parts ORDER BY messages")


def _cold(url: str, config: Any = THREAD) -> list[Any]:
    with open_postgres_saver(url, fold=fold_messages) as saver:
        return list(saver.get_delta_channel_history(config=config, channels=["messages"])[
            "messages"
        ]["seed"])  # fmt: skip


def test_one_base_extended_by_parts_and_a_cold_read_replays_less_than_a_part(
    url: str, replays: list[tuple[int, int]]
) -> None:
    [(_, _, base_length)] = _base(url)
    lengths = [base_length] + [length for length, _ in _parts(url)]
    assert base_length == 200 and len(lengths) > 2
    assert all(PART <= b - a < PART + PER_TURN for a, b in zip(lengths, lengths[1:], strict=False))
    assert TURNS * PER_TURN - lengths[-1] < PART

    assert _cold(url) == from_the_start(url)
    [(walked, rows)] = replays
    with open_postgres_saver(url, fold=fold_messages) as saver:
        newest_first = [s.config["configurable"]["checkpoint_id"] for s in saver.list(THREAD)]
    assert walked == newest_first.index(_parts(url)[-1][1])  # the walk stopped at the last part
    assert rows < PART


def test_the_servers_saver_reads_from_the_parts_too(
    url: str, replays: list[tuple[int, int]]
) -> None:
    async def read() -> list[Any]:
        async with async_postgres_saver(url, fold=fold_messages) as saver:
            cold = await saver.aget_delta_channel_history(config=THREAD, channels=["messages"])
            return list(cold["messages"]["seed"])

    assert asyncio.run(read()) == from_the_start(url)
    [(_, rows)] = replays
    assert rows < PART


def test_the_servers_saver_appends_parts(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")

    async def grow() -> None:
        async with async_postgres_saver(url, fold=fold_messages) as saver:
            agent = scripted_agent(saver, range(60))
            for turn in range(60):
                await agent.ainvoke({"messages": [("user", f"question {turn}")]}, THREAD)

    asyncio.run(grow())
    assert [length for _, _, length in _base(url)] == [200]
    assert _parts(url) and _cold(url) == from_the_start(url)


def test_a_part_that_does_not_fit_is_passed_over(url: str, replays: list[tuple[int, int]]) -> None:
    newest = _parts(url)[-1][0]
    with psycopg.connect(url) as conn:  # a part one message short of its stated length
        conn.execute(
            "UPDATE ferry_history_parts SET messages = messages + 1 WHERE messages = %s", (newest,)
        )
    assert _cold(url) == from_the_start(url)
    [(walked, rows)] = replays
    with open_postgres_saver(url, fold=fold_messages) as saver:
        newest_first = [s.config["configurable"]["checkpoint_id"] for s in saver.list(THREAD)]
    assert walked == newest_first.index(_parts(url)[-2][1])  # from the part before it


def test_an_older_checkpoint_reads_as_replaying_from_the_start_gives(url: str) -> None:
    with open_postgres_saver(url, fold=fold_messages) as saver:
        states = [s.config for s in saver.list(THREAD)]
    for config in (states[30], states[len(states) // 3], states[-30]):
        assert _cold(url, config) == from_the_start(url, config)
    assert len(_base(url)) == 1  # shorter histories are not saved over the longer one


def test_a_fork_past_the_base_appends_no_part_of_the_other_branch(url: str) -> None:
    base, parts = _base(url), _parts(url)
    with open_postgres_saver(url, fold=fold_messages) as saver:
        agent = scripted_agent(saver, range(1000, 1010))
        fork_point = next(
            s for s in agent.get_state_history(THREAD) if len(s.values["messages"]) == 240
        )
        run(agent, range(1), fork_point.config)
        run(agent, range(1, 10))  # 40 messages past the fork: more than a part's worth
        head = agent.get_state(THREAD).values["messages"]
    assert len(head) == 280 and head[-1].content == "answer 1009"
    assert _base(url) == base and _parts(url) == parts
    assert _cold(url) == from_the_start(url)


def test_delete_leaves_no_part_behind(url: str) -> None:
    assert _parts(url)
    with open_postgres_saver(url, fold=fold_messages) as saver:
        saver.delete_thread("long")
    assert _base(url) == [] and _parts(url) == []


def test_checkpoints_are_read_with_each_blob_found_by_its_key() -> None:
    from langgraph.checkpoint.postgres.base import SELECT_SQL as STOCK

    from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver

    # LangGraph's query text is what Ferry rewrites: a new LangGraph that changed it shows here.
    assert FerryPostgresSaver.SELECT_SQL != STOCK
    assert AsyncFerryPostgresSaver.SELECT_SQL == FerryPostgresSaver.SELECT_SQL
    assert "cross join lateral" in FerryPostgresSaver.SELECT_SQL

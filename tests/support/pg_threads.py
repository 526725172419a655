"""Long Postgres threads for the stored-history tests, and what reading them costs.

Imported by every test process (`replays` is a plugin fixture), so Postgres is loaded only
when a test uses it: whether `graph.storage.postgres.saver` is loaded changes how leases are taken.

agent = scripted_agent(saver, range(TURNS))     # a `lookup` call and an answer a turn
run(agent, range(TURNS))
from_the_start(url, THREAD)                      # LangGraph's own replay, to compare with
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import tool

from graph.state import fold_messages
from graph.storage.internals import snapshot_value
from tests.support.scripted import ScriptedModel, answer, tool_call

THREAD: Any = {"configurable": {"thread_id": "long"}}


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}: " + "lorem ipsum " * 20


def scripted_agent(saver: Any, turns: range) -> Any:
    """Ferry's graph on `saver`, scripted to call `lookup` and answer once a turn."""
    from graph import build_graph

    steps: list[Any] = []
    for turn in turns:
        steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    return build_graph(model=ScriptedModel(steps), tools=[lookup], checkpointer=saver)


def run(agent: Any, turns: range, config: Any = THREAD) -> None:
    """Ask one question a turn."""
    for turn in turns:
        agent.invoke({"messages": [("user", f"question {turn}")]}, config)


def from_the_start(url: str, config: Any = THREAD) -> list[Any]:
    """The messages as LangGraph's own saver replays them, from the thread's start."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from graph.storage.postgres.saver import open_postgres_saver

    with psycopg.connect(url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        with open_postgres_saver(url) as ferry:
            stock = PostgresSaver(conn, serde=ferry.serde)
            entry = stock.get_delta_channel_history(config=config, channels=["messages"])
    history = entry["messages"]
    return fold_messages(snapshot_value(history.get("seed")), [v for _, _, v in history["writes"]])


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """(checkpoints walked, write rows read) of each rebuild."""
    import graph.storage.postgres.stored_histories as pg

    seen: list[tuple[int, int]] = []
    replayed = pg.replayed

    def spy(chain: list[str], seed: Any, rows: Any, serde: Any) -> Any:
        seen.append((len(chain), len(rows)))
        return replayed(chain, seed, rows, serde)

    monkeypatch.setattr(pg, "replayed", spy)
    yield seen

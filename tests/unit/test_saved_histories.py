"""A new process reads a long thread from its saved history and the writes after it.

The saver saves a thread's history each time it has grown by half (from 200 messages on), one
row per thread. These tests check what users would notice if that went wrong: a cold read that
differs from what the running process saw, time travel or a fork that picks up the wrong
history, a saved copy left behind by prune or delete, or copies that pile up."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from graph import build_graph
from graph.storage import sqlite_saver
from graph.storage.retention import prune_thread
from graph.storage.saved_parts import PART
from tests.support.scripted import ScriptedModel, answer, tool_call

THREAD = "long"
CONFIG: Any = {"configurable": {"thread_id": THREAD}}
PER_TURN = 4  # question, call, result, answer


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}: " + "lorem ipsum " * 20


def _graph(db: Path, turns: range = range(0)) -> Any:
    steps: list[Any] = []
    for turn in turns:
        steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    return build_graph(model=ScriptedModel(steps), tools=[lookup], checkpointer=sqlite_saver(db))


def _run(graph: Any, turns: range, config: Any = CONFIG) -> None:
    for turn in turns:
        graph.invoke({"messages": [("user", f"question {turn}")]}, config)


def _saved(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT thread_id, checkpoint_id, messages FROM ferry_histories"
        ).fetchall()


def _parts(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT messages, checkpoint_id FROM ferry_history_parts ORDER BY messages"
        ).fetchall()


def _contents(graph: Any, config: Any = CONFIG) -> list[Any]:
    return [(m.id, m.content) for m in graph.get_state(config).values["messages"]]


def test_a_cold_read_starts_from_the_saved_history(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(60))
    _run(running, range(60))
    expected = _contents(running)
    assert len(expected) == 60 * PER_TURN

    [(thread, saved_at, length)] = _saved(db)
    assert thread == THREAD and 200 <= length < 60 * PER_TURN
    chain = [s.config["configurable"]["checkpoint_id"] for s in running.get_state_history(CONFIG)]
    assert saved_at in chain
    # Remove every message write the saved copy stands for: a read that still comes out whole
    # can only have started from the saved copy.
    older = chain[chain.index(saved_at) + 1 :]
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            f"DELETE FROM writes WHERE channel = 'messages' AND checkpoint_id IN "
            f"({','.join('?' * len(older))})",
            older,
        )
    assert _contents(_graph(db)) == expected


def test_one_copy_per_thread_extended_by_parts_never_copied_again(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(110))
    _run(running, range(60))
    [(_, base_at, base_length)] = _saved(db)
    _run(running, range(60, 110))
    assert _saved(db) == [(THREAD, base_at, base_length)]  # the base is not copied again
    parts = _parts(db)
    lengths = [base_length] + [length for length, _ in parts]
    assert all(PART <= b - a < PART + PER_TURN for a, b in zip(lengths, lengths[1:], strict=False))
    assert 110 * PER_TURN - lengths[-1] < PART  # a cold read replays less than a part

    # Without any message write the saved copy stands for, a cold read still comes out whole.
    expected = _contents(running)
    chain = [s.config["configurable"]["checkpoint_id"] for s in running.get_state_history(CONFIG)]
    older = chain[chain.index(parts[-1][1]) + 1 :]
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            f"DELETE FROM writes WHERE channel = 'messages' AND checkpoint_id IN "
            f"({','.join('?' * len(older))})",
            older,
        )
    assert _contents(_graph(db)) == expected
    # Reading an older checkpoint in a new process rebuilds a shorter history: nothing is saved.
    early = list(running.get_state_history(CONFIG))[-40]
    _graph(db).get_state(early.config)
    assert _saved(db) == [(THREAD, base_at, base_length)] and _parts(db) == parts


def test_a_fork_past_the_base_appends_no_part_of_the_other_branch(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(60))
    _run(running, range(60))
    [(_, base_at, _)] = _saved(db)
    parts = _parts(db)
    fork_point = next(
        s for s in running.get_state_history(CONFIG) if len(s.values["messages"]) == 55 * PER_TURN
    )
    assert _saved(db)[0][2] < 55 * PER_TURN < parts[-1][0]  # between the base and the newest part
    forked = _graph(db, range(1000, 1001))
    forked.invoke({"messages": [("user", "a different question")]}, fork_point.config)
    head = _contents(_graph(db))  # the fork's new checkpoint is now the thread's newest
    assert len(head) == 56 * PER_TURN and head[-1][1] == "answer 1000"
    assert _saved(db)[0][1] == base_at and _parts(db) == parts


def test_time_travel_before_the_saved_history_reads_what_was_there(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(60))
    _run(running, range(60))
    [(_, saved_at, _)] = _saved(db)
    states = list(running.get_state_history(CONFIG))
    at = [s.config["configurable"]["checkpoint_id"] for s in states].index(saved_at)
    cold = _graph(db)
    for state in (states[at + 5], states[at], states[at - 5]):  # before, at and after it
        assert _contents(cold, state.config) == [
            (m.id, m.content) for m in state.values["messages"]
        ]


def test_a_fork_from_before_the_saved_history_does_not_see_the_other_branch(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(60))
    _run(running, range(60))
    fork_point = next(
        s for s in running.get_state_history(CONFIG) if len(s.values["messages"]) == 30 * PER_TURN
    )
    forked = _graph(db, range(1000, 1001))
    forked.invoke({"messages": [("user", "a different question")]}, fork_point.config)
    head = _contents(_graph(db))
    assert len(head) == 30 * PER_TURN + PER_TURN
    assert head[-4][1] == "a different question" and head[-1][1] == "answer 1000"
    assert "question 30" not in [content for _, content in head]


def test_prune_and_delete_leave_no_saved_copy_behind(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    running = _graph(db, range(70))
    _run(running, range(60))
    expected = _contents(running)
    assert len(_saved(db)) == 1
    prune_thread(sqlite_saver(db), THREAD, keep=3)  # the saved checkpoint is among those removed
    assert _saved(db) == [] and _parts(db) == []
    assert _contents(_graph(db)) == expected

    sqlite_saver(db).delete_thread(THREAD)
    assert _saved(db) == [] and _graph(db).get_state(CONFIG).values == {}

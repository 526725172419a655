"""The message reducer: `add_messages`' semantics, and no value it returned ever changes.

It carries each history's id index over to the next instead of rebuilding it, so these tests
fold the way LangGraph does (one update at a time, each onto the last result), branch off old
values, and fold copies, and check every result against `add_messages` and against snapshots.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langgraph.graph.message import add_messages

from graph import state
from graph.state import fold_messages, merge_messages
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import tool_call
from tests.support.turns import ask


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return f"value of {key}"


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [lookup]


def snapshot(messages: list[AnyMessage]) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in messages]


def random_update(rng: random.Random, current: list[AnyMessage], n: int) -> list[Any]:
    """New messages, replacements by id, or removals of messages that exist."""
    kind = rng.random()
    if current and kind < 0.25:
        target = rng.choice(current)
        return [AIMessage(f"edit {n}", id=target.id)]
    if current and kind < 0.35:
        return [RemoveMessage(id=rng.choice(current).id or "")]
    return [HumanMessage(f"m{n}-{j}", id=f"id{n}-{j}") for j in range(rng.randint(1, 3))]


def test_folding_matches_add_messages_and_leaves_earlier_values_as_they_were() -> None:
    rng = random.Random(14)
    values: list[tuple[list[AnyMessage], list[tuple[str | None, Any]]]] = []
    mine: list[AnyMessage] = []
    reference: list[AnyMessage] = []
    updates = []
    for n in range(400):
        update = random_update(rng, reference, n)
        updates.append(update)
        mine = merge_messages(mine, update)
        reference = add_messages(reference, update)  # type: ignore[assignment]
        assert snapshot(mine) == snapshot(reference)
        values.append((mine, snapshot(mine)))
    for value, seen in values:
        assert snapshot(value) == seen  # nothing returned earlier changed since
    assert snapshot(fold_messages([], updates)) == snapshot(mine)  # batching does not matter


def test_a_branch_off_an_old_value_and_a_copy_see_their_own_ids() -> None:
    base = fold_messages([], [[HumanMessage("q", id="q")]])
    with_a = merge_messages(base, [AIMessage("a", id="a")])
    with_b = merge_messages(base, [AIMessage("b", id="b")])  # the same base again
    assert [m.id for m in merge_messages(with_a, [AIMessage("a2", id="a")])] == ["q", "a"]
    assert [m.id for m in merge_messages(with_b, [AIMessage("a", id="a")])] == ["q", "b", "a"]
    copy = list(with_a)  # what the saver hands out
    assert [m.content for m in merge_messages(copy, [AIMessage("a3", id="a")])] == ["q", "a3"]
    assert [m.content for m in with_a] == ["q", "a"] and [m.content for m in copy] == ["q", "a"]
    longer = merge_messages(with_a, [AIMessage("c", id="c")])
    assert [m.id for m in merge_messages(longer, [RemoveMessage(id="a")])] == ["q", "c"]
    assert [m.id for m in longer] == ["q", "a", "c"]


def test_a_history_is_not_taken_for_another_with_the_same_length_and_last_message() -> None:
    first = fold_messages([], [[HumanMessage("q", id="q"), AIMessage("a", id="a")]])
    first = merge_messages(first, [HumanMessage("b", id="b")])
    merge_messages(first, [AIMessage("c", id="c")])
    other = [first[0], AIMessage("not a", id="x"), first[2]]  # differs before its last message
    merged = merge_messages(other, [AIMessage("c", id="c")])
    assert [m.content for m in merged] == ["q", "not a", "b", "c"]


def test_a_result_is_filed_after_its_call_even_where_a_longer_history_has_it_later() -> None:
    calls = [{"name": "f", "args": {}, "id": "c1", "type": "tool_call"}]
    start = [HumanMessage("q", id="q"), AIMessage("", tool_calls=calls, id="a")]
    before = fold_messages([], [[*start, HumanMessage("new question", id="h")]])
    longer = merge_messages(before, [HumanMessage("x", id="x")])
    result = ToolMessage("r", tool_call_id="c1", id="t")
    unfiled = merge_messages(longer, [RemoveMessage(id="x"), result])  # removals: appended
    assert [m.id for m in unfiled] == ["q", "a", "h", "t"]
    assert [m.id for m in merge_messages(before, [result])] == ["q", "a", "t", "h"]


def test_appending_carries_the_id_index_over_instead_of_rebuilding_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexes = state._Indexes(8)
    monkeypatch.setattr(state, "_INDEXES", indexes)
    history = fold_messages([], [[HumanMessage(str(i), id=str(i)) for i in range(2_000)]])
    private = []
    take = indexes.take

    def spy(messages: list[AnyMessage]) -> Any:
        positions, kept = take(messages)
        private.append(kept is None)  # a private index: built, or copied and cut
        return positions, kept

    monkeypatch.setattr(indexes, "take", spy)
    for n in range(50):  # onto the last result, or a copy of it as the saver hands out
        base = list(history) if n % 2 else history
        history = merge_messages(base, [AIMessage(f"a{n}", id=f"a{n}")])
    assert private == [False] * 50 and len(history) == 2_050


def loop_updates(rng: random.Random, steps: int) -> list[list[AnyMessage]]:
    """Updates like the loop's: questions, calls, their results (some late), replies, edits."""
    updates: list[list[AnyMessage]] = []
    waiting: list[str] = []
    for n in range(steps):
        kind = rng.random()
        if waiting and kind < 0.4:  # a result, possibly after a newer question: filed in place
            call = waiting.pop(rng.randrange(len(waiting)))
            updates.append([ToolMessage(f"result {n}", tool_call_id=call, id=f"r{n}")])
        elif kind < 0.6:
            calls = [f"c{n}-{j}" for j in range(rng.randint(1, 3))]
            waiting = calls
            tool_calls = [{"name": "f", "args": {}, "id": c, "type": "tool_call"} for c in calls]
            updates.append([AIMessage("", tool_calls=tool_calls, id=f"a{n}")])
        elif kind < 0.7 and updates:
            updates.append([AIMessage(f"edited {n}", id=rng.choice(updates)[0].id)])
        else:
            updates.append([HumanMessage(f"q{n}", id=f"h{n}")])
    return updates


def test_the_channel_the_saver_and_a_cold_rebuild_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2014)
    updates = loop_updates(rng, 300)
    channel: list[AnyMessage] = []
    saver: list[AnyMessage] = []
    expected = []
    for update in updates:
        channel = merge_messages(list(channel), update)  # LangGraph folds onto copies too
        saver = fold_messages(saver, [[m.model_copy() for m in update]])  # as read back
        expected.append(snapshot(channel))
        assert snapshot(saver) == expected[-1]
    monkeypatch.setattr(state, "_INDEXES", state._Indexes(0))  # nothing carried over
    for i in range(0, len(updates), 37):
        assert snapshot(fold_messages([], updates[: i + 1])) == expected[i]


def test_streamed_values_and_snapshots_keep_their_own_messages(
    make_agent: Agent, scripted: Scripted
) -> None:
    model = scripted([tool_call("lookup", key="k"), "first", "second"])
    graph = make_agent(model)
    config = {"configurable": {"thread_id": "t1"}}
    chunks = list(graph.stream({"messages": [("user", "one")]}, config, stream_mode="values"))
    seen = [snapshot(chunk["messages"]) for chunk in chunks]
    state = graph.get_state(config).values["messages"]
    stored = snapshot(state)
    ask(graph, "two")
    assert [snapshot(chunk["messages"]) for chunk in chunks] == seen
    lengths = [len(s) for s in seen]
    assert lengths == sorted(lengths) and lengths[0] == 1 and lengths[-1] == 4  # not one list
    assert snapshot(state) == stored
    assert len(graph.get_state(config).values["messages"]) == len(stored) + 2

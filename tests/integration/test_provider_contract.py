"""One loop contract, run with each provider's real client against its emulator.

Each server answers HTTP 400 to a history its real API would reject (a call without its result,
a stray or duplicate result), so every scenario also proves the tool-call contract holds in that
wire format. What only one provider has stays in test_openai_loop.py / test_anthropic_loop.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool

from graph import build_graph
from graph.fence import fenced_data
from graph.guards import turn_counters
from graph.storage import sqlite_saver
from tests.support.providers import PROVIDERS, Item, Provider
from tests.support.servers.scripted import ScriptedServer
from tests.support.turns import ask

CALLS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    CALLS.append(key)
    if key == "missing":
        raise ToolException(f"Key {key!r} not found; known keys are one letter long.")
    return f"{key}={len(key)}"


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


@pytest.fixture
def server(provider: Provider) -> Iterator[ScriptedServer]:
    CALLS.clear()
    with provider.server() as running:
        yield running
    assert running.rejections == [], running.rejections
    running.assert_complete()


def make(provider: Provider, server: ScriptedServer, db: Path) -> Any:
    """The graph with the provider's real client pointed at its test server."""
    return build_graph(model=provider.model(server), tools=[lookup], checkpointer=sqlite_saver(db))


def sent(provider: Provider, server: ScriptedServer, n: int) -> list[Item]:
    """What the `n`th model request sent, provider-neutral."""
    return provider.transcript(provider.requests(server)[n])


def test_parallel_calls_then_answer(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        [
            provider.tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "bb"})),
            provider.answer("a=1, bb=2"),
        ]
    )
    result = ask(make(provider, server, tmp_path / "db"), "look up a and bb")
    assert sorted(CALLS) == ["a", "bb"]
    assert result["messages"][-1].content == "a=1, bb=2"
    assert turn_counters(result["messages"])["usage"]["total_tokens"] > 0
    assert provider.tool_names(provider.requests(server)[0]) == ["lookup"]
    items = sent(provider, server, 1)
    assert [i.kind for i in items] == ["user", "tool_use", "tool_use", "tool_result", "tool_result"]
    assert sorted(i.call_id for i in items[3:]) == sorted(i.call_id for i in items[1:3])
    assert sorted(str(fenced_data(i.text)) for i in items[3:]) == ["a=1", "bb=2"]
    assert {i.is_error for i in items[3:]} <= {False, None}


def test_a_tool_error_is_sent_back_as_an_error(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        [provider.tool_calls(("lookup", {"key": "missing"})), provider.answer("No such key.")]
    )
    result = ask(make(provider, server, tmp_path / "db"), "look up missing")
    assert result["stop_reason"] == "answered"
    assert [m.status for m in result["messages"] if isinstance(m, ToolMessage)] == ["error"]
    [error] = [i for i in sent(provider, server, 1) if i.kind == "tool_result"]
    assert "not found" in error.text
    assert error.is_error in (True, None)  # OpenAI's wire format has no error flag


def test_multi_turn_sends_the_whole_conversation(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script([provider.answer("Hi Ada"), provider.answer("You are Ada")])
    graph = make(provider, server, tmp_path / "db")
    ask(graph, "I am Ada")
    ask(graph, "Who am I?")
    assert [(i.kind, i.text) for i in sent(provider, server, 1)] == [
        ("user", "I am Ada"),
        ("assistant", "Hi Ada"),
        ("user", "Who am I?"),
    ]


def test_streaming_yields_answer_tokens(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script([provider.answer("A streamed answer with several words")])
    graph = make(provider, server, tmp_path / "db")
    config: Any = {"configurable": {"thread_id": "s"}}
    tokens = [
        chunk.text
        for chunk, meta in graph.stream(
            {"messages": [("user", "stream")]}, config, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "call_model"
    ]
    assert len([t for t in tokens if t]) > 1
    assert "".join(tokens) == "A streamed answer with several words"
    assert provider.requests(server)[0]["stream"] is True
    state = graph.get_state(config).values
    assert state["messages"][-1].text == "A streamed answer with several words"
    assert turn_counters(state["messages"])["usage"]["total_tokens"] > 0


def test_dead_run_then_new_question_is_accepted_by_the_provider(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    server.script([provider.tool_calls(("lookup", {"key": "a"})), provider.answer("fresh")])
    config: Any = {"configurable": {"thread_id": "t1"}}
    make(provider, server, db).invoke(
        {"messages": [("user", "first")]}, config, interrupt_before=["execute_tool"]
    )
    result = ask(make(provider, server, db), "second question")
    assert result["messages"][-1].content == "fresh"
    items = sent(provider, server, 1)
    assert [i.kind for i in items] == ["user", "tool_use", "tool_result", "user"]
    repaired, question = items[2:]
    assert repaired.call_id == items[1].call_id and "interrupted" in repaired.text
    assert repaired.is_error in (True, None)
    assert question.text == "second question"
    kinds = [type(m) for m in result["messages"]]
    assert kinds == [HumanMessage, AIMessage, ToolMessage, HumanMessage, AIMessage]
    assert result["messages"][2].status == "error"
    assert CALLS == []


def test_resume_after_an_interrupted_tool_step(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    server.script([provider.tool_calls(("lookup", {"key": "x"})), provider.answer("x=1")])
    config: Any = {"configurable": {"thread_id": "t1"}}
    make(provider, server, db).invoke(
        {"messages": [("user", "x?")]}, config, interrupt_before=["execute_tool"]
    )
    result = make(provider, server, db).invoke(None, config)
    assert CALLS == ["x"]
    assert [type(m) for m in result["messages"][1:]] == [AIMessage, ToolMessage, AIMessage]
    assert result["stop_reason"] == "answered"

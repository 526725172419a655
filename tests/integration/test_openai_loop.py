"""The real ChatOpenAI client through Ferry's graph, against the OpenAI-compatible test server.

The server answers HTTP 400 to any history a real provider would reject, so every scenario here
also proves the tool-call contract holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from graph import build_graph
from graph.guards import turn_counters
from graph.settings import Settings
from graph.storage import sqlite_saver
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.turns import ask

CALLS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    CALLS.append(key)
    return f"{key}={len(key)}"


@tool
def fetch_page(n: int) -> str:
    """Fetch a long page.

    Args:
        n: the page number.
    """
    return f"page {n}: " + "lorem ipsum " * 500


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    CALLS.clear()
    with OpenAIServer() as running:
        yield running
    assert running.rejections == [], running.rejections


def make(server: OpenAIServer, db: Path, **settings: Any) -> Any:
    """The graph with the real ChatOpenAI client pointed at the test server."""
    model = ChatOpenAI(
        model="gpt-4.1-mini",
        base_url=server.url + "/v1",
        api_key="sk-test-loop",  # type: ignore[arg-type]
        max_retries=0,
        stream_usage=True,
    )
    return build_graph(
        model=model,
        tools=[lookup, fetch_page],
        checkpointer=sqlite_saver(db),
        settings=Settings(**settings),
    )


def test_parallel_calls_then_answer(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(
        [
            openai_tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "bb"})),
            openai_answer("a=1, bb=2"),
        ]
    )
    result = ask(make(server, tmp_path / "db"), "look up a and bb")
    assert sorted(CALLS) == ["a", "bb"]
    assert result["messages"][-1].content == "a=1, bb=2"
    assert turn_counters(result["messages"])["usage"]["total_tokens"] > 0
    second = server.chat_requests()[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    call_ids = [c["id"] for c in second[2]["tool_calls"]]
    assert sorted(m["tool_call_id"] for m in second[3:]) == sorted(call_ids)
    assert [t["function"]["name"] for t in server.chat_requests()[0]["tools"]] == [
        "lookup",
        "fetch_page",
    ]
    server.assert_complete()


def test_multi_turn_sends_the_whole_conversation(server: OpenAIServer, tmp_path: Path) -> None:
    server.script([openai_answer("Hi Ada"), openai_answer("You are Ada")])
    graph = make(server, tmp_path / "db")
    ask(graph, "I am Ada")
    ask(graph, "Who am I?")
    sent = server.chat_requests()[1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "I am Ada"),
        ("assistant", "Hi Ada"),
        ("user", "Who am I?"),
    ]


def test_streaming_yields_answer_tokens(server: OpenAIServer, tmp_path: Path) -> None:
    server.script([openai_answer("A streamed answer with several words")])
    graph = make(server, tmp_path / "db")
    tokens = [
        chunk.content
        for chunk, meta in graph.stream(
            {"messages": [("user", "stream")]},
            {"configurable": {"thread_id": "s"}},
            stream_mode="messages",
        )
        if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "call_model"
    ]
    assert len([t for t in tokens if t]) > 1
    assert "".join(str(t) for t in tokens) == "A streamed answer with several words"
    assert server.chat_requests()[0]["stream"] is True


def test_dead_run_then_new_question_is_accepted_by_the_provider(
    server: OpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    server.script([openai_tool_calls(("lookup", {"key": "a"})), openai_answer("fresh")])
    graph = make(server, db)
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [("user", "first")]}, config, interrupt_before=["execute_tool"])
    result = ask(make(server, db), "second question")
    assert result["messages"][-1].content == "fresh"
    sent = server.chat_requests()[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert "interrupted" in sent[3]["content"]
    assert CALLS == []


def test_resume_after_an_interrupted_tool_step(server: OpenAIServer, tmp_path: Path) -> None:
    db = tmp_path / "db"
    server.script([openai_tool_calls(("lookup", {"key": "x"})), openai_answer("x=1")])
    config = {"configurable": {"thread_id": "t1"}}
    make(server, db).invoke(
        {"messages": [("user", "x?")]}, config, interrupt_before=["execute_tool"]
    )
    result = make(server, db).invoke(None, config)
    assert CALLS == ["x"]
    kinds = [type(m) for m in result["messages"]]
    assert kinds[1:] == [AIMessage, ToolMessage, AIMessage]
    assert result["stop_reason"] == "answered"


def _factory_graph(server: OpenAIServer, db: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The graph as users get it: the model from FERRY_MODEL through Ferry's factory."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loop")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("FERRY_MODEL", "openai:gpt-4.1-mini")
    return build_graph(tools=[lookup], checkpointer=sqlite_saver(db))


def test_model_call_honours_retry_after(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from tests.support.servers.base import Reply

    server.script([openai_answer("after the wait")])
    server.fail_next(Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}))
    graph = _factory_graph(server, tmp_path / "db", monkeypatch)
    started = time.monotonic()
    result = ask(graph, "hello")
    assert result["messages"][-1].content == "after the wait"
    assert len(server.chat_requests()) == 2  # one retry
    assert time.monotonic() - started >= 0.9


def test_a_model_that_stays_down_fails_after_bounded_attempts(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    from tests.support.servers.base import Reply

    server.fail_next(Reply(503, {"error": {"message": "down"}}, {"Retry-After": "0"}), times=10)
    graph = _factory_graph(server, tmp_path / "db", monkeypatch)
    with pytest.raises(openai.InternalServerError):
        ask(graph, "hello")
    assert len(server.chat_requests()) == 4  # the first try and three retries
    server.script([openai_answer("back")])
    server._faults.clear()
    resumed = graph.invoke(None, {"configurable": {"thread_id": "t1"}})  # the turn is resumable
    assert resumed["messages"][-1].content == "back"


def test_prompt_stays_bounded_while_the_history_grows(server: OpenAIServer, tmp_path: Path) -> None:
    turns = 12
    steps: list[Any] = []
    for i in range(turns):
        steps += [openai_tool_calls(("fetch_page", {"n": i})), openai_answer("ok")]
    server.script(steps)
    graph = make(server, tmp_path / "db", context_tokens=8000)
    for i in range(turns):
        ask(graph, f"question {i}")
    sizes = [len(json.dumps(body)) for body in server.chat_requests()]
    assert max(sizes[-4:]) < 2 * 8000 * 4  # about four characters a token, with room for JSON
    stored = graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    assert sum(len(str(m.content)) for m in stored) > 12 * 6000  # the record stays whole
    last = server.chat_requests()[-1]["messages"]
    assert any("omitted" in str(m.get("content")) for m in last if m["role"] == "tool")
    assert [m["role"] for m in last][-3:] == ["user", "assistant", "tool"]  # latest turn whole

"""What only OpenAI has, through Ferry's graph: Retry-After, retry bounds, prompt trimming.

The scenarios both providers share (parallel calls, tool errors, multi-turn, streaming, repair
and resume) are in test_provider_contract.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from tests.support.lookup import CALLS, lookup
from tests.support.providers import OPENAI
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.turns import ask


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
    return build_graph(
        model=OPENAI.model(server),
        tools=[lookup, fetch_page],
        checkpointer=sqlite_saver(db),
        settings=Settings(**settings),
    )


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
    graph = make(server, tmp_path / "db", context_tokens=8000, compaction="drop")
    for i in range(turns):
        ask(graph, f"question {i}")
    sizes = [len(json.dumps(body)) for body in server.chat_requests()]
    assert max(sizes[-4:]) < 2 * 8000 * 4  # about four characters a token, with room for JSON
    stored = graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    assert sum(len(str(m.content)) for m in stored) > 12 * 6000  # the record stays whole
    last = server.chat_requests()[-1]["messages"]
    assert [m["role"] for m in last][:3] == ["system", "user", "user"]  # first question, note
    assert last[1]["content"] == "question 0" and "omitted" in last[2]["content"]
    assert len(last) < 4 * turns  # whole old turns left out, not only their results
    assert [m["role"] for m in last][-3:] == ["user", "assistant", "tool"]  # latest turn whole

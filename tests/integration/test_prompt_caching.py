"""Anthropic's prompt cache over a long conversation: what Ferry marks and what that saves.

The Anthropic emulator accounts cache reads and writes as the API does (tests/support/servers/
anthropic.py `PromptCache`), so the share of input read from the cache is measured, with Ferry's
model (`FERRY_MODEL=anthropic:...`) and with a plain `ChatAnthropic`, which marks nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from graph import build_graph
from graph.models import make_model
from graph.runs.report import thread_usage
from graph.storage import sqlite_saver
from tests.support.lookup import CALLS, lookup
from tests.support.providers import ANTHROPIC
from tests.support.servers.anthropic import AnthropicServer, anthropic_answer
from tests.support.turns import ask

TURNS = 50


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    CALLS.clear()
    with AnthropicServer() as running:
        yield running
    assert running.rejections == [], running.rejections


def conversation(model: Any, server: AnthropicServer, db: Path) -> list[BaseMessage]:
    """`TURNS` questions and answers on one thread; the stored messages."""
    server.script([anthropic_answer(f"Answer {i}: " + "and so on " * 40) for i in range(TURNS)])
    graph = build_graph(model=model, tools=[lookup], checkpointer=sqlite_saver(db))
    for i in range(TURNS):
        result = ask(graph, f"Question {i}: " + "tell me more " * 20, thread="long")
    messages: list[BaseMessage] = result["messages"]
    return messages


def read_share(messages: list[BaseMessage]) -> float:
    """Of all input tokens the replies report, the share read from the cache."""
    usage = [m.usage_metadata or {} for m in messages if isinstance(m, AIMessage)]
    read = sum((u.get("input_token_details") or {}).get("cache_read", 0) for u in usage)
    return read / sum(u.get("input_tokens", 0) for u in usage)


def test_ferrys_anthropic_model_reads_most_input_from_the_cache(
    server: AnthropicServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)

    marked = conversation(make_model("anthropic:claude-test"), server, tmp_path / "m.db")

    first = server.message_requests()[0]
    assert first["cache_control"] == {"type": "ephemeral"}
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    share = read_share(marked)
    print(f"input read from the cache over {TURNS} turns, marked: {share:.0%}")
    assert share > 0.8


def test_a_model_that_marks_nothing_reads_nothing_from_the_cache(
    server: AnthropicServer, tmp_path: Path
) -> None:
    unmarked = conversation(ANTHROPIC.model(server), server, tmp_path / "u.db")

    assert "cache_control" not in server.message_requests()[-1]
    assert read_share(unmarked) == 0


def test_the_ledger_adds_up_every_reply_and_reads_the_same_after_a_resume(
    server: AnthropicServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    db = tmp_path / "m.db"
    messages = conversation(make_model("anthropic:claude-test"), server, db)

    ledger = thread_usage(messages)

    usage = [m.usage_metadata or {} for m in messages if isinstance(m, AIMessage)]
    details = [u.get("input_token_details") or {} for u in usage]
    assert ledger["cache_read_tokens"] == sum(d.get("cache_read", 0) for d in details) > 0
    assert ledger["cache_creation_tokens"] == sum(d.get("cache_creation", 0) for d in details)
    assert ledger["input_tokens"] == sum(u["input_tokens"] for u in usage)
    # Another process's graph on the same file (a resume) reads the same ledger.
    again = build_graph(
        model=ANTHROPIC.model(server), tools=[lookup], checkpointer=sqlite_saver(db)
    )
    stored = again.get_state({"configurable": {"thread_id": "long"}}).values["messages"]
    assert thread_usage(stored) == ledger

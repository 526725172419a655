"""The real ChatAnthropic client through Ferry's graph, against the Anthropic Messages emulator.

The server answers HTTP 400 to any history the real API would reject (a `tool_use` without its
`tool_result` right after, text before results, a duplicate or stray result), so every scenario
here also proves the tool-call contract holds with content-block replies. The scenarios both
providers share are in test_provider_contract.py; these are about content blocks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from graph import build_graph
from graph.core.fence import fenced_data
from graph.core.settings import Settings
from graph.guards import turn_counters
from graph.prompt import SYSTEM_PROMPT
from graph.storage import sqlite_saver
from tests.support.cli_helpers import Ferry, ferry_env, history, one_json_object, succeeded
from tests.support.lookup import CALLS, lookup
from tests.support.providers import ANTHROPIC
from tests.support.servers.anthropic import AnthropicServer, anthropic_answer, anthropic_tool_uses
from tests.support.turns import ask


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    CALLS.clear()
    with AnthropicServer() as running:
        yield running
    assert running.rejections == [], running.rejections


def make(server: AnthropicServer, db: Path, **settings: Any) -> Any:
    return build_graph(
        model=ANTHROPIC.model(server),
        tools=[lookup],
        checkpointer=sqlite_saver(db),
        settings=Settings(**settings),
    )


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A sent message's content as blocks, whether it was sent as a string or a list."""
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def test_parallel_tool_uses_then_answer(server: AnthropicServer, tmp_path: Path) -> None:
    server.script(
        [
            anthropic_tool_uses(("lookup", {"key": "a"}), ("lookup", {"key": "bb"}), text="On it."),
            anthropic_answer("a=1, bb=2"),
        ]
    )
    result = ask(make(server, tmp_path / "db"), "look up a and bb")
    assert sorted(CALLS) == ["a", "bb"]
    assert result["messages"][-1].content == "a=1, bb=2"
    assert turn_counters(result["messages"])["usage"]["total_tokens"] > 0
    first, second = server.message_requests()
    assert first["system"] == SYSTEM_PROMPT
    assert [(t["name"], t["input_schema"]["required"]) for t in first["tools"]] == [
        ("lookup", ["key"])
    ]
    sent = second["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    call_ids = [b["id"] for b in sent[1]["content"] if b["type"] == "tool_use"]
    assert len(call_ids) == 2
    results = sent[2]["content"]
    assert sorted(r["tool_use_id"] for r in results) == sorted(call_ids)
    assert {(r["type"], r["is_error"]) for r in results} == {("tool_result", False)}
    assert sorted(str(fenced_data(r["content"])) for r in results) == ["a=1", "bb=2"]


def test_streamed_tool_uses_are_sent_back_as_the_api_expects(
    server: AnthropicServer, tmp_path: Path
) -> None:
    server.script(
        [
            anthropic_tool_uses(("lookup", {"key": "abc"}), text="Let me look that up."),
            anthropic_answer("abc=3"),
        ]
    )
    graph = make(server, tmp_path / "db")
    config = {"configurable": {"thread_id": "s"}}
    for _ in graph.stream({"messages": [("user", "abc?")]}, config, stream_mode="messages"):
        pass
    assert CALLS == ["abc"]
    # Streamed blocks carry `index` and `partial_json`; the real API rejects such extra keys.
    assistant = server.message_requests()[1]["messages"][1]
    assert [sorted(b) for b in assistant["content"]] == [
        ["text", "type"],
        ["id", "input", "name", "type"],
    ]
    assert assistant["content"][1]["input"] == {"key": "abc"}
    messages = graph.get_state(config).values["messages"]
    assert [m.text for m in messages if isinstance(m, AIMessage)] == [
        "Let me look that up.",
        "abc=3",
    ]


def test_cli_shows_text_not_blocks(cli: Ferry, server: AnthropicServer, tmp_path: Path) -> None:
    server.script(
        [
            anthropic_tool_uses(
                ("calculator", {"expression": "150 * 3"}), text="Let me calculate that."
            ),
            anthropic_answer("150 * 3 = 450"),
        ]
    )
    env = ferry_env(tmp_path, FERRY_MODEL="anthropic:claude-test")
    env |= {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url}
    report = one_json_object(cli("ask", "What is 150 * 3?", "--json", env=env, cwd=tmp_path))
    assert report["answer"] == "150 * 3 = 450"
    assert report["stop_reason"] == "answered"
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("calculator", "success")]
    assert report["usage"]["total_tokens"] > 0
    messages = history(report["thread_id"], env=env, cwd=tmp_path, run=cli)
    assert all(isinstance(m["content"], str) for m in messages)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "What is 150 * 3?"),
        ("assistant", "Let me calculate that."),
        ("tool", "450"),
        ("assistant", "150 * 3 = 450"),
    ]
    assert server.message_requests()[0]["stream"] is True


def test_cli_streams_the_text_of_block_replies(
    cli: Ferry, server: AnthropicServer, tmp_path: Path
) -> None:
    server.script(
        [
            anthropic_tool_uses(("calculator", {"expression": "2 + 2"}), text="Adding."),
            anthropic_answer("2 + 2 = 4"),
        ]
    )
    env = ferry_env(tmp_path, FERRY_MODEL="anthropic:claude-test")
    env |= {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url}
    done = succeeded(cli("ask", "2 + 2?", env=env, cwd=tmp_path))
    assert done.stdout == "Adding.\n2 + 2 = 4\n"
    assert "→ calculator(" in done.stderr

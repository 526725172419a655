"""Malformed model output and a model that never ends, through the OpenAI emulator.

Each test ends with the thread still usable: the emulator answers 400 to any history the real
API would reject, and the `server` fixture fails the test on any such rejection.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI

from graph import build_graph
from graph.core.settings import Settings
from graph.guards import MAX_ARGUMENTS_CHARS
from graph.models.calls import ReplyCutShort, cut_short
from graph.storage import sqlite_saver
from tests.support.lookup import CALLS, lookup
from tests.support.servers.base import Reply
from tests.support.servers.openai import (
    OpenAIServer,
    cut_stream,
    openai_answer,
    openai_tool_calls,
    slow_stream,
)
from tests.support.turns import ask

pytestmark = pytest.mark.timeout(60)

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


class Crash(BaseException):
    """Ends the run mid-tool the way a kill would: nothing catches it."""


@tool
def crash(key: str) -> str:
    """Crash the run.

    Args:
        key: anything.
    """
    raise Crash


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    CALLS.clear()
    with OpenAIServer() as running:
        yield running
    assert running.rejections == [], running.rejections


def make(
    server: OpenAIServer,
    db: Path,
    *,
    streaming: bool = False,
    tools: list[BaseTool] | None = None,
    max_retries: int = 2,
    **settings: Any,
) -> Any:
    """The graph on the real ChatOpenAI client (its default retries) pointed at the emulator."""
    model = ChatOpenAI(
        model="gpt-4.1-mini",
        base_url=server.url + "/v1",
        api_key="sk-test-malformed",  # type: ignore[arg-type]
        streaming=streaming,
        stream_usage=True,
        max_retries=max_retries,
    )
    return build_graph(
        model=model,
        tools=tools or [lookup],
        checkpointer=sqlite_saver(db),
        settings=Settings(**settings),
    )


def stored(graph: Any) -> list[Any]:
    return list(graph.get_state(CONFIG).values["messages"])


def results(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


@pytest.mark.parametrize(
    ("streaming", "arguments"),
    [(False, '{"key": "notes'), (True, '{"key": notes}')],  # unterminated; not JSON at all
)
def test_arguments_that_are_not_json_are_answered_and_the_model_tries_again(
    server: OpenAIServer, tmp_path: Path, streaming: bool, arguments: str
) -> None:
    server.script(
        [
            openai_tool_calls(("lookup", arguments, "call_bad")),
            openai_tool_calls(("lookup", {"key": "notes"}, "call_good")),
            openai_answer("notes has 5 letters"),
            openai_answer("still fine"),
        ]
    )
    graph = make(server, tmp_path / "db", streaming=streaming)
    result = ask(graph, "how long is notes?")
    assert result["stop_reason"] == "answered"
    assert result["messages"][-1].content == "notes has 5 letters"
    bad = results(result["messages"])["call_bad"]
    assert bad.status == "error"
    assert "not valid JSON" in str(bad.content) and "JSON object" in str(bad.content)
    assert CALLS == ["notes"]  # only the well-formed call ran
    second = server.chat_requests()[1]["messages"]
    assert [m["role"] for m in second][-3:] == ["user", "assistant", "tool"]
    assert second[-1]["tool_call_id"] == "call_bad"
    # The thread stays valid: the next question is accepted (the fixture checks no 400).
    assert ask(graph, "and now?")["messages"][-1].content == "still fine"


def test_a_stream_cut_mid_answer_is_not_stored_and_the_model_is_asked_again(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(
        [cut_stream(openai_answer("Partial answer complete"), 15), openai_answer("Whole answer")]
    )
    graph = make(server, tmp_path / "db", streaming=True)
    result = ask(graph, "tell me")
    assert result["stop_reason"] == "answered"
    assert [type(m) for m in result["messages"]] == [HumanMessage, AIMessage]
    assert result["messages"][-1].content == "Whole answer"
    assert len(server.chat_requests()) == 2


def test_arguments_cut_twice_are_never_run_and_the_turn_resumes(
    server: OpenAIServer, tmp_path: Path
) -> None:
    cut = cut_stream(openai_tool_calls(("lookup", {"key": "notes-secret-v2"})), 20)
    server.script([cut, cut])  # cut at '{"key": "notes-secret'
    graph = make(server, tmp_path / "db", streaming=True)
    with pytest.raises(ReplyCutShort, match="cut short"):
        ask(graph, "look up the notes")
    assert CALLS == []
    assert [type(m) for m in stored(graph)] == [HumanMessage]  # nothing of the cut replies

    server.script([openai_tool_calls(("lookup", {"key": "notes-secret-v2"})), openai_answer("ok")])
    resumed = graph.invoke(None, CONFIG)
    assert resumed["stop_reason"] == "answered" and resumed["messages"][-1].content == "ok"
    assert CALLS == ["notes-secret-v2"]


def test_unknown_tool_and_huge_arguments_are_refused_in_a_valid_history(
    server: OpenAIServer, tmp_path: Path
) -> None:
    huge = "x" * (MAX_ARGUMENTS_CHARS + 1)
    server.script(
        [
            openai_tool_calls(("no_such_tool", {}, "call_unknown"), ("lookup", {"key": huge})),
            openai_answer("sorry"),
            openai_answer("next"),
        ]
    )
    graph = make(server, tmp_path / "db")
    result = ask(graph, "go")
    assert result["messages"][-1].content == "sorry"
    answered = results(result["messages"])
    assert "Unknown tool 'no_such_tool'" in str(answered["call_unknown"].content)
    assert "over the limit" in str(answered["call_1_2"].content)
    assert {m.status for m in answered.values()} == {"error"}
    assert CALLS == []
    assert ask(graph, "again")["messages"][-1].content == "next"


def test_a_resume_without_the_tool_answers_its_call_with_an_error(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script([openai_tool_calls(("crash", {"key": "a"}, "call_gone")), openai_answer("done")])
    with pytest.raises(Crash):
        ask(make(server, tmp_path / "db", tools=[lookup, crash]), "go")
    graph = make(server, tmp_path / "db", tools=[lookup])  # this process has no `crash`
    resumed = graph.invoke(None, CONFIG)
    assert resumed["messages"][-1].content == "done"
    gone = results(resumed["messages"])["call_gone"]
    assert gone.status == "error" and "Unknown tool 'crash'" in str(gone.content)


@pytest.mark.parametrize(
    "step",
    [
        Reply(body=b"", delay_s=40),  # a model that never answers
        slow_stream(openai_tool_calls(("lookup", {"key": "y" * 100_000})), 0.005),  # ~85 s
    ],
    ids=["hung", "slow-huge-argument"],
)
def test_the_time_budget_bounds_a_model_call(
    server: OpenAIServer, tmp_path: Path, step: Any
) -> None:
    budget_s = 2.0
    server.script([step])
    # Without the SDK's retries: a request the turn gave up on times out in the abandoned call
    # and the SDK sends it again, outside the budget and after the turn ended (a model handed in
    # keeps its client's own retries; Ferry's own refuse them: test_given_up_calls.py), so the
    # emulator would see calls past its script whenever the request times out first.
    graph = make(server, tmp_path / "db", streaming=True, time_budget_s=budget_s, max_retries=0)
    started = time.monotonic()
    result = ask(graph, "go")
    elapsed = time.monotonic() - started
    assert result["stop_reason"] == "time_budget"
    assert budget_s <= elapsed < budget_s + 5, elapsed
    assert CALLS == []
    server.script([openai_answer("back")])  # the thread takes the next question
    assert ask(graph, "again")["messages"][-1].content == "back"


@pytest.mark.parametrize(
    ("metadata", "cut"),
    [
        ({"model_provider": "openai", "finish_reason": "stop"}, False),
        ({"model_provider": "openai"}, True),
        ({"model_provider": "anthropic", "stop_reason": "tool_use"}, False),
        ({"model_provider": "anthropic", "stop_reason": None}, True),
        ({}, False),  # a model that reports no finish reason at all (offline, scripted)
    ],
)
def test_cut_short_reads_each_providers_finish_reason(metadata: dict[str, Any], cut: bool) -> None:
    assert cut_short(AIMessage("", response_metadata=metadata)) is cut


def test_the_cli_says_when_a_cut_reply_is_asked_for_again(
    server: OpenAIServer, tmp_path: Path, cli: Any
) -> None:
    server.script(
        [cut_stream(openai_answer("Partial answer complete"), 15), openai_answer("Whole answer")]
    )
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-malformed",
        "OPENAI_BASE_URL": server.url + "/v1",
        "FERRY_MODEL": "openai:gpt-4.1-mini",
    }
    done = cli("ask", "tell me", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("Whole answer\n")
    assert "(the reply was cut short; asking the model again)" in done.stderr
    # The cut text, if it was shown, is on a line of its own, never run into the answer.
    assert "Partial answerWhole" not in done.stdout.replace(" ", "")

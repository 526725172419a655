"""One contract, run with each provider's real client against its emulator.

First the emulators themselves: what the real client sends and gets back, and the HTTP 400 each
answers to a history its real API would reject (a call without its result, a stray or duplicate
result). Then Ferry's loop on them, so every loop scenario also proves the tool-call contract
holds in that wire format. What only one provider has stays in test_openai_server.py /
test_anthropic_server.py (the wire format) and test_openai_loop.py / test_anthropic_loop.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool

from graph.core.fence import fenced_data
from graph.guards import turn_counters
from graph.storage import sqlite_saver
from tests.support.fixtures import Agent
from tests.support.lookup import CALLS, lookup
from tests.support.providers import PROVIDERS, Item, Provider
from tests.support.servers.scripted import ScriptedServer
from tests.support.turns import ask


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [lookup]


# --- the emulators, driven by each real client ------------------------------------------------


@pytest.fixture
def emulator(provider: Provider) -> Iterator[ScriptedServer]:
    """The provider's test server; rejected requests are the tests' to check."""
    with provider.server() as running:
        yield running


def merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return sum(chunks[1:], chunks[0])


def called(call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": "a"}, "id": call_id}])


def test_plain_answer(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script([provider.answer("Hello from the loopback")])

    reply = provider.model(emulator).bind_tools([lookup]).invoke("hi")

    assert reply.content == "Hello from the loopback"
    assert reply.tool_calls == []
    assert provider.stop(reply) == "answer"
    [body] = provider.requests(emulator)
    assert body["model"] == provider.model_name
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert provider.tool_names(body) == ["lookup"]


def test_parallel_tool_calls(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script([provider.tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "bb"}))])

    reply = provider.model(emulator).bind_tools([lookup]).invoke("look up a and bb")

    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("lookup", {"key": "a"}),
        ("lookup", {"key": "bb"}),
    ]
    assert len({c["id"] for c in reply.tool_calls}) == 2
    assert provider.stop(reply) == "tool_use"


SENT_RESULT = {  # the error flag is the difference: OpenAI's wire format has none
    "openai": {"role": "tool", "content": "Key not found", "tool_call_id": "call_m"},
    "anthropic": {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "content": "Key not found",
                "tool_use_id": "call_m",
                "is_error": True,
            }
        ],
    },
}


def test_a_full_tool_round_trip_is_accepted(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script(
        [provider.tool_calls(("lookup", {"key": "m"}, "call_m")), provider.answer("No key m.")]
    )
    model = provider.model(emulator).bind_tools([lookup])
    history: list[BaseMessage] = [HumanMessage("Look up m")]

    history.append(model.invoke(history))
    history.append(ToolMessage("Key not found", tool_call_id="call_m", status="error"))
    final = model.invoke(history)

    assert final.content == "No key m."
    assert provider.requests(emulator)[1]["messages"][-1] == SENT_RESULT[provider.name]
    assert emulator.rejections == []


def test_stream_answer_tokens_and_usage(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script([provider.answer("It is twenty-one degrees in Madrid today", usage=(50, 4))])

    chunks = list(provider.model(emulator).bind_tools([lookup]).stream("Weather in Madrid?"))

    texts = [c.text for c in chunks if c.text]
    assert len(texts) >= 3
    assert "".join(texts) == "It is twenty-one degrees in Madrid today"
    merged = merge(chunks)
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["total_tokens"] == 54
    assert provider.requests(emulator)[0]["stream"] is True


def test_stream_tool_calls(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script([provider.tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "bb"}))])

    chunks = list(provider.model(emulator).bind_tools([lookup]).stream("look up a and bb"))

    assert sum(1 for c in chunks if c.tool_call_chunks) > 2  # arguments arrive in pieces
    merged = merge(chunks)
    assert [c["args"] for c in merged.tool_calls] == [{"key": "a"}, {"key": "bb"}]
    assert provider.stop(merged) == "tool_use"


def test_callable_step_sees_the_request(provider: Provider, emulator: ScriptedServer) -> None:
    emulator.script([lambda body: provider.answer(f"{len(body['messages'])} messages")])

    assert provider.model(emulator).invoke("hi").content == "1 messages"


@pytest.mark.off_script("calls past the script to see it refused")
def test_a_call_past_the_script_is_a_server_error(
    provider: Provider, emulator: ScriptedServer
) -> None:
    emulator.script([provider.answer("only one")])
    model = provider.model(emulator)
    model.invoke("hi")

    with pytest.raises(provider.server_error, match="unexpected model call"):
        model.invoke("again")

    with pytest.raises(AssertionError, match="1 unexpected model call"):
        emulator.assert_complete()


@pytest.mark.off_script("leaves a step unplayed to see it reported")
def test_assert_complete_reports_unplayed_steps(
    provider: Provider, emulator: ScriptedServer
) -> None:
    emulator.script([provider.answer("a"), provider.answer("b")])
    provider.model(emulator).invoke("hi")

    with pytest.raises(AssertionError, match="1 of 2 steps unplayed"):
        emulator.assert_complete()


@pytest.mark.parametrize(
    ("history", "openai_says", "anthropic_says"),
    [
        pytest.param(
            [HumanMessage("a?"), called("call_x"), HumanMessage("Never mind.")],
            "did not have response messages: call_x",
            "`tool_use` ids were found without `tool_result` blocks immediately after: call_x",
            id="a call then a question",
        ),
        pytest.param(
            [HumanMessage("a?"), called("call_x")],
            "did not have response messages: call_x",
            "`tool_use` ids were found without `tool_result` blocks immediately after: call_x",
            id="a call as the last message",
        ),
        pytest.param(
            [HumanMessage("hi"), ToolMessage("a=1", tool_call_id="call_x")],
            "must be a response to a preceeding message",
            "unexpected `tool_use_id` found in `tool_result` blocks: call_x",
            id="a result without any call",
        ),
        pytest.param(
            [HumanMessage("a?"), called("call_a"), ToolMessage("a=1", tool_call_id="call_b")],
            "'call_b' not found",
            "unexpected `tool_use_id` found in `tool_result` blocks: call_b",
            id="a result for another call",
        ),
        pytest.param(
            [
                HumanMessage("a?"),
                called("call_a"),
                ToolMessage("a=1", tool_call_id="call_a"),
                ToolMessage("a=1", tool_call_id="call_a"),
            ],
            "duplicate",
            "Found multiple `tool_result` blocks with id: call_a",
            id="two results for one call",
        ),
    ],
)
def test_a_history_the_real_api_rejects_is_rejected(
    provider: Provider,
    emulator: ScriptedServer,
    history: list[BaseMessage],
    openai_says: str,
    anthropic_says: str,
) -> None:
    says = {"openai": openai_says, "anthropic": anthropic_says}[provider.name]

    with pytest.raises(provider.bad_request) as caught:
        provider.model(emulator).invoke(history)

    assert says in str(caught.value)
    assert len(emulator.rejections) == 1
    emulator.assert_complete()  # a rejected request plays no step


# --- Ferry's loop on each emulator ------------------------------------------------------------


@pytest.fixture
def server(provider: Provider) -> Iterator[ScriptedServer]:
    CALLS.clear()
    with provider.server() as running:
        yield running
    assert running.rejections == [], running.rejections


def sent(provider: Provider, server: ScriptedServer, n: int) -> list[Item]:
    """What the `n`th model request sent, provider-neutral."""
    return provider.transcript(provider.requests(server)[n])


def test_parallel_calls_then_answer(
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        [
            provider.tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "bb"})),
            provider.answer("a=1, bb=2"),
        ]
    )
    result = ask(
        make_agent(provider.model(server), sqlite_saver(tmp_path / "db")), "look up a and bb"
    )
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
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        [provider.tool_calls(("lookup", {"key": "missing"})), provider.answer("No such key.")]
    )
    result = ask(
        make_agent(provider.model(server), sqlite_saver(tmp_path / "db")), "look up missing"
    )
    assert result["stop_reason"] == "answered"
    assert [m.status for m in result["messages"] if isinstance(m, ToolMessage)] == ["error"]
    [error] = [i for i in sent(provider, server, 1) if i.kind == "tool_result"]
    assert "not found" in error.text
    assert error.is_error in (True, None)  # OpenAI's wire format has no error flag


def test_multi_turn_sends_the_whole_conversation(
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script([provider.answer("Hi Ada"), provider.answer("You are Ada")])
    graph = make_agent(provider.model(server), sqlite_saver(tmp_path / "db"))
    ask(graph, "I am Ada")
    ask(graph, "Who am I?")
    assert [(i.kind, i.text) for i in sent(provider, server, 1)] == [
        ("user", "I am Ada"),
        ("assistant", "Hi Ada"),
        ("user", "Who am I?"),
    ]


def test_streaming_yields_answer_tokens(
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script([provider.answer("A streamed answer with several words")])
    graph = make_agent(provider.model(server), sqlite_saver(tmp_path / "db"))
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
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    server.script([provider.tool_calls(("lookup", {"key": "a"})), provider.answer("fresh")])
    config: Any = {"configurable": {"thread_id": "t1"}}
    make_agent(provider.model(server), sqlite_saver(db)).invoke(
        {"messages": [("user", "first")]}, config, interrupt_before=["execute_tool"]
    )
    result = ask(make_agent(provider.model(server), sqlite_saver(db)), "second question")
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
    make_agent: Agent, provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    server.script([provider.tool_calls(("lookup", {"key": "x"})), provider.answer("x=1")])
    config: Any = {"configurable": {"thread_id": "t1"}}
    make_agent(provider.model(server), sqlite_saver(db)).invoke(
        {"messages": [("user", "x?")]}, config, interrupt_before=["execute_tool"]
    )
    result = make_agent(provider.model(server), sqlite_saver(db)).invoke(None, config)
    assert CALLS == ["x"]
    assert [type(m) for m in result["messages"][1:]] == [AIMessage, ToolMessage, AIMessage]
    assert result["stop_reason"] == "answered"

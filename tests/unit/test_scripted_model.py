"""The scripted fake model: recording, loud over-calls, streaming and tool binding."""

from __future__ import annotations

import asyncio
import copy
import pickle
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from tests.support.scripted import (
    ScriptedModel,
    UnexpectedModelCall,
    answer,
    parallel,
    tool_call,
    tool_calls,
    with_usage,
)


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"21 °C in {city}"


def test_plays_steps_in_order_and_records_what_it_was_sent() -> None:
    model = ScriptedModel([tool_call("get_weather", city="Madrid"), answer("It is 21 °C")])

    first = model.invoke([HumanMessage("Weather in Madrid?")])
    second = model.invoke([HumanMessage("Weather in Madrid?"), first])

    assert first.tool_calls == [
        {"name": "get_weather", "args": {"city": "Madrid"}, "id": "call_1", "type": "tool_call"}
    ]
    assert second.content == "It is 21 °C"
    assert [[m.type for m in call] for call in model.calls] == [["human"], ["human", "ai"]]
    assert model.calls[1][1].tool_calls[0]["id"] == "call_1"
    model.assert_complete()


def test_recorded_messages_are_copies() -> None:
    model = ScriptedModel(["ok"])
    history: list[BaseMessage] = [HumanMessage("hi")]

    model.invoke(history)
    history[0].content = "changed"

    assert model.calls[0][0].content == "hi"


@pytest.mark.off_script("over-calls the model to see it fail")
def test_over_call_raises_and_fails_assert_complete() -> None:
    model = ScriptedModel([answer("only one")])
    model.invoke("hi")

    with pytest.raises(UnexpectedModelCall, match="only 1 steps scripted"):
        model.invoke("again")

    assert len(model.calls) == 2
    with pytest.raises(UnexpectedModelCall):
        model.assert_complete()


@pytest.mark.off_script("leaves a step unplayed to see it reported")
def test_assert_complete_reports_unplayed_steps() -> None:
    model = ScriptedModel([answer("a"), answer("b")])
    model.invoke("hi")

    with pytest.raises(AssertionError, match="1 of 2 steps unplayed .*; left: answer 'b'"):
        model.assert_complete()


def test_messages_get_unique_stable_ids() -> None:
    model = ScriptedModel([answer("a"), answer("b")])

    ids = [model.invoke("hi").id, model.invoke("hi").id]

    assert all(ids) and len(set(ids)) == 2
    assert ScriptedModel(["c"]).invoke("hi").id not in ids


def test_parallel_calls_get_distinct_ids() -> None:
    turns = [
        parallel(tool_call("get_weather", city="Madrid"), tool_call("get_weather", city="Oslo")),
        tool_calls(("get_weather", {"city": "Rome"}), ("search", {"query": "ferry"})),
    ]
    model = ScriptedModel(turns)

    first, second = model.invoke("hi"), model.invoke("hi")

    assert [c["args"]["city"] for c in first.tool_calls] == ["Madrid", "Oslo"]
    assert [c["id"] for c in first.tool_calls + second.tool_calls] == [
        "call_1",
        "call_2",
        "call_3",
        "call_4",
    ]
    assert second.tool_calls[1]["name"] == "search"


def test_usage_metadata_per_step() -> None:
    model = ScriptedModel(
        [with_usage(tool_call("get_weather", city="Madrid"), 30, 5), answer("ok", usage=(40, 2))]
    )

    first, second = model.invoke("hi"), model.invoke("hi")

    assert first.usage_metadata == {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
    assert second.usage_metadata is not None
    assert second.usage_metadata["total_tokens"] == 42


def test_exception_step_is_raised_and_the_script_goes_on() -> None:
    model = ScriptedModel([TimeoutError("model timed out"), answer("recovered")])

    with pytest.raises(TimeoutError):
        model.invoke("hi")

    assert model.invoke("hi").content == "recovered"
    model.assert_complete()


def test_callable_step_sees_the_messages() -> None:
    def echo(messages: list[BaseMessage]) -> AIMessage:
        return answer(f"you said {messages[-1].content}")

    model = ScriptedModel([echo])

    assert model.invoke("ping").content == "you said ping"


def test_stream_yields_several_text_chunks() -> None:
    model = ScriptedModel([answer("It is 21 °C in Madrid", usage=(10, 6))])

    chunks = list(model.stream("hi"))

    assert len(chunks) >= 3
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert "".join(str(c.content) for c in chunks) == "It is 21 °C in Madrid"
    assert len({c.id for c in chunks}) == 1
    merged = sum(chunks[1:], chunks[0])
    assert merged.usage_metadata == {"input_tokens": 10, "output_tokens": 6, "total_tokens": 16}
    assert len(model.calls) == 1


def test_stream_tool_calls_as_tool_call_chunks() -> None:
    model = ScriptedModel(
        [parallel(tool_call("get_weather", city="Madrid"), tool_call("get_weather", city="Oslo"))]
    )

    chunks = list(model.stream("hi"))

    assert any(c.tool_call_chunks for c in chunks)
    merged = sum(chunks[1:], chunks[0])
    assert [(c["id"], c["args"]) for c in merged.tool_calls] == [
        ("call_1", {"city": "Madrid"}),
        ("call_2", {"city": "Oslo"}),
    ]


def test_invoke_that_streams_still_returns_the_whole_message() -> None:
    class TokenCollector(BaseCallbackHandler):
        def __init__(self) -> None:
            self.chunks: list[Any] = []

        def on_llm_new_token(self, token: str, *, chunk: Any = None, **kwargs: Any) -> None:
            self.chunks.append(chunk)

    model = ScriptedModel([tool_call("get_weather", city="Madrid")])
    collector = TokenCollector()

    reply = model.invoke("hi", {"callbacks": [collector]}, stream=True)

    assert len(collector.chunks) >= 2  # it went through _stream
    assert reply.tool_calls[0]["args"] == {"city": "Madrid"}
    assert reply.tool_calls[0]["id"] == "call_1"
    assert reply.id is not None and reply.id.startswith("scripted-")


def test_bind_tools_records_names_and_shares_the_script() -> None:
    model = ScriptedModel([answer("ok")])

    bound = model.bind_tools([get_weather], tool_choice="auto")
    bound.invoke("hi")

    assert model.bound_tools == ["get_weather"]
    assert model.tool_choice == "auto"
    assert len(model.calls) == 1
    model.assert_complete()


def test_copies_share_the_script() -> None:
    model = ScriptedModel([answer("a"), answer("b")])

    copy.deepcopy(model).invoke("hi")
    model.model_copy().invoke("hi")

    assert len(model.calls) == 2
    model.assert_complete()


def test_pickles_into_a_model_with_its_own_script() -> None:
    model = ScriptedModel([answer("a")])

    restored = pickle.loads(pickle.dumps(model))

    assert restored.invoke("hi").content == "a"
    assert model.invoke("hi").content == "a"  # another process's copy plays none of this one


def test_langgraph_messages_mode_sees_tokens() -> None:
    model = ScriptedModel([answer("It is 21 °C in Madrid today")])

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    app = graph.compile()

    tokens = [
        chunk.content
        for chunk, _ in app.stream({"messages": [("user", "hi")]}, stream_mode="messages")
    ]

    assert len(tokens) >= 3
    assert "".join(map(str, tokens)) == "It is 21 °C in Madrid today"
    model.assert_complete()


def test_async_invoke_and_stream() -> None:
    model = ScriptedModel([answer("first"), answer("second reply here")])

    async def run() -> tuple[AIMessage, list[AIMessageChunk]]:
        return await model.ainvoke("hi"), [c async for c in model.astream("hi")]

    reply, chunks = asyncio.run(run())

    assert reply.content == "first"
    assert "".join(str(c.content) for c in chunks) == "second reply here"
    model.assert_complete()


def test_a_test_leaving_steps_unplayed_fails_naming_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    pytester.makeconftest(
        "from tests.conftest import _every_script_played, pytest_configure, "
        "pytest_runtest_makereport"
    )
    pytester.makepyfile(
        """
        import pytest
        from tests.support.scripted import ScriptedModel, answer, tool_call

        def test_unplayed():
            model = ScriptedModel([answer("a"), tool_call("get_weather", city="Oslo")])
            model.invoke("hi")

        def test_over_called():
            model = ScriptedModel([])
            with pytest.raises(AssertionError):
                model.invoke("hi")

        @pytest.mark.off_script("the point of this test")
        def test_marked():
            ScriptedModel([answer("a")])

        @pytest.mark.off_script("stale")
        def test_marked_but_played():
            ScriptedModel([answer("a")]).invoke("hi")

        def test_failed_already():
            ScriptedModel([answer("a")])
            assert False
        """
    )
    result = pytester.runpytest_subprocess("-n", "0")
    result.assert_outcomes(passed=4, failed=1, errors=3)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_unplayed*",
            "  test_*.py:5: ScriptedModel: 1 of 2 steps unplayed (1 calls made); "
            "left: tool call get_weather({'city': 'Oslo'})",
            "*ERROR at teardown of test_over_called*",
            "  test_*.py:9: ScriptedModel called 1 time(s) more than the 0 scripted",
            "*ERROR at teardown of test_marked_but_played*",
            "marked off_script, but every script was played: remove the mark",
        ]
    )

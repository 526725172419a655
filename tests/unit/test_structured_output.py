"""Answers in a schema (`response_format`): what the model is offered, sent back and stored.

Each test drives the real graph with a scripted model on both savers and checks the whole
message sequence, what the model was sent, and what the thread stores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from graph import build_graph
from graph.core.settings import ConfigError, Settings
from graph.models.offline import OfflineModel
from graph.output import response_format
from tests.support.scripted import ScriptedModel, answer, tool_call, tool_calls
from tests.support.servers.base import LoopbackServer, Reply, Request


@tool
def weather(city: str) -> str:
    """Report the weather.

    Args:
        city: the city.
    """
    return f"{city}: 21 °C"


class Forecast(BaseModel):
    """The weather in one city."""

    city: str
    celsius: float = Field(ge=-90, le=60)


class Note(TypedDict):
    title: str
    tags: list[str]


@dataclass
class Point:
    x: int
    y: int


SUM_SCHEMA = {
    "title": "Sum",
    "type": "object",
    "properties": {"total": {"type": "integer"}, "unit": {"enum": ["m", "km"]}},
    "required": ["total"],
}


def agent(model: Any, saver: BaseCheckpointSaver[Any], schema: Any = None, **settings: Any) -> Any:
    return build_graph(
        model=model,
        tools=[weather],
        checkpointer=saver,
        settings=Settings(**settings),
        response_format=schema,
    )


def run(graph: Any, text: str, thread: str = "t1", **configurable: Any) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread, **configurable}}
    result: dict[str, Any] = graph.invoke({"messages": [("user", text)]}, config)
    return result


def kinds(messages: list[Any]) -> list[str]:
    return [
        type(m).__name__.removesuffix("Message")
        + (f"({','.join(c['name'] for c in m.tool_calls)})" if getattr(m, "tool_calls", 0) else "")
        for m in messages
    ]


def test_a_tool_then_the_answer_is_stored_as_plain_json(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted(
        [tool_call("weather", city="Oslo"), tool_call("Forecast", city="Oslo", celsius="21")]
    )
    graph = agent(model, saver, Forecast)

    result = run(graph, "weather in Oslo, as a forecast")

    assert result["stop_reason"] == "answered"
    assert result["structured_response"] == {"city": "Oslo", "celsius": 21.0}  # coerced
    assert type(result["structured_response"]) is dict  # stored data names no code
    assert kinds(result["messages"]) == [
        "Human", "AI(weather)", "Tool", "AI(Forecast)", "Tool"
    ]  # fmt: skip
    assert result["messages"][-1].status == "success"
    # The answer tool is offered beside the tools, and a call is required every step.
    assert model.bound_tools == ["weather", "Forecast"]
    assert model.tool_choice == "any"
    stored = graph.get_state({"configurable": {"thread_id": "t1"}}).values
    assert stored["structured_response"] == {"city": "Oslo", "celsius": 21.0}


def test_an_invalid_answer_is_sent_back_with_what_was_wrong(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted(
        [
            tool_call("Forecast", city="Oslo", celsius=400),
            tool_call("Forecast", city="Oslo", celsius=4),
        ]
    )
    result = run(agent(model, saver, Forecast), "Oslo?")

    assert result["structured_response"] == {"city": "Oslo", "celsius": 4.0}
    sent_back = model.calls[1][-1]
    assert isinstance(sent_back, ToolMessage) and sent_back.status == "error"
    assert "celsius: Input should be less than or equal to 60" in sent_back.text
    assert "Call Forecast again" in sent_back.text
    assert kinds(result["messages"]) == ["Human", "AI(Forecast)", "Tool", "AI(Forecast)", "Tool"]


def test_an_answer_never_valid_ends_the_turn_in_words(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    wrong = tool_call("Forecast", city="Oslo")  # celsius missing, every time
    model = scripted([wrong, wrong, wrong])  # the first try and FERRY_OUTPUT_RETRIES=2 more
    result = run(agent(model, saver, Forecast), "Oslo?")

    assert result["stop_reason"] == "invalid_output"
    assert result.get("structured_response") is None
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and "did not match the answer schema" in final.text
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["error"] * 3
    assert all("celsius: Field required" in m.text for m in results)


def test_retries_follow_the_setting(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([tool_call("Forecast", city="Oslo")])
    result = run(agent(model, saver, Forecast, output_retries=0), "Oslo?")
    assert result["stop_reason"] == "invalid_output"


def test_an_answer_beside_other_calls_waits_for_their_results(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    early = tool_calls(("weather", {"city": "Oslo"}), ("Forecast", {"city": "Oslo", "celsius": 9}))
    model = scripted([early, tool_call("Forecast", city="Oslo", celsius=21)])
    result = run(agent(model, saver, Forecast), "Oslo?")

    assert result["structured_response"] == {"city": "Oslo", "celsius": 21.0}
    results = {m.name: m for m in model.calls[1] if isinstance(m, ToolMessage)}
    assert "Oslo: 21 °C" in results["weather"].text
    assert results["Forecast"].status == "error" and "alone" in results["Forecast"].text


def test_a_run_sends_its_own_json_schema(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([tool_call("Sum", total="7"), tool_call("Sum", total=7, unit="km")])
    graph = agent(model, saver)  # no schema of its own

    result = run(graph, "how far?", response_format=SUM_SCHEMA)

    assert result["structured_response"] == {"total": 7, "unit": "km"}
    assert 'total: "7" is not of type "integer"' in model.calls[1][-1].text
    assert model.bound_tools == ["weather", "Sum"]


def test_a_new_turn_without_a_schema_clears_the_last_answer(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([tool_call("Sum", total=7), answer("Seven.")])
    graph = agent(model, saver)
    run(graph, "how far?", response_format=SUM_SCHEMA)

    result = run(graph, "say it in words")

    assert result["stop_reason"] == "answered" and result["structured_response"] is None
    assert result["messages"][-1].text == "Seven."  # words are an answer again


def test_an_answer_in_json_words_is_taken_and_other_words_end_the_turn(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([answer('```json\n{"total": 3}\n```'), answer("It is three.")])
    graph = agent(model, saver, SUM_SCHEMA)

    assert run(graph, "how many?", "a")["structured_response"] == {"total": 3}
    ended = run(graph, "how many?", "b")
    assert ended["stop_reason"] == "invalid_output"
    assert ended["messages"][-1].text == "It is three."  # the words are kept


def test_schemas_of_every_kind_validate_to_plain_json() -> None:
    assert response_format(Note).validate({"title": "x", "tags": ["a"]}) == {
        "title": "x",
        "tags": ["a"],
    }
    assert response_format(Point).validate({"x": "1", "y": 2}) == {"x": 1, "y": 2}
    assert response_format(Point).name == "Point"
    assert response_format(SUM_SCHEMA).name == "Sum"
    with pytest.raises(ValueError, match="y: Field required"):
        response_format(Point).validate({"x": 1})


def _nested(levels: int) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    for _ in range(levels):
        inner = {"allOf": [inner]}
    return {"properties": {"deep": inner}}


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "array"}, 'must describe an object ("type": "object")'),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "not a valid JSON schema"),
        (int, "must be a pydantic model, a TypedDict, a dataclass or a JSON schema"),
        ({"type": "object"} | _nested(70), "deeper than 64"),
    ],
)
def test_a_schema_that_cannot_work_fails_at_build(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any], schema: Any, says: str
) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        agent(scripted([]), saver, schema)


def test_a_schema_titled_like_a_tool_gets_an_answer_tool_of_its_own(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([tool_call("weather", city="Oslo"), tool_call("weather_answer", city="x")])
    schema = {"title": "weather", "type": "object", "properties": {"city": {"type": "string"}}}
    result = run(agent(model, saver, schema), "Oslo?")
    assert model.bound_tools == ["weather", "weather_answer"]
    assert result["structured_response"] == {"city": "x"}
    assert "Oslo: 21 °C" in result["messages"][2].text  # the tool ran as a tool


def test_only_invalid_answers_spend_the_retries(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    beside = tool_calls(("weather", {"city": "Oslo"}), ("Forecast", {"city": "Oslo", "celsius": 1}))
    wrong = tool_call("Forecast", city="Oslo")
    model = scripted([beside, beside, wrong, wrong, tool_call("Forecast", city="Oslo", celsius=2)])
    result = run(agent(model, saver, Forecast), "Oslo?")  # 2 corrections: still answered
    assert result["structured_response"] == {"city": "Oslo", "celsius": 2.0}


def test_formats_are_checked() -> None:
    when = response_format(
        {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}
    )
    assert when.validate({"at": "2026-12-06T07:00:00Z"}) == {"at": "2026-12-06T07:00:00Z"}
    with pytest.raises(ValueError, match='at: "soon" is not a "date-time"'):
        when.validate({"at": "soon"})


def test_a_resumed_turn_answers_in_the_schema_its_run_began_with(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    model = scripted([tool_call("weather", city="Oslo"), tool_call("Sum", total=3)])
    graph = build_graph(
        model=model,
        tools=[weather],
        checkpointer=saver,
        settings=Settings(approve_tools="weather"),
    )
    config = {"configurable": {"thread_id": "r", "response_format": SUM_SCHEMA}}
    graph.invoke({"messages": [("user", "how many?")]}, config)  # paused for approval
    stored = graph.get_state({"configurable": {"thread_id": "r"}}).values
    assert stored["answer_schema"] == SUM_SCHEMA

    # Resumed without the schema: the turn's own applies.
    from langgraph.types import Command

    resumed = graph.invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), {"configurable": {"thread_id": "r"}}
    )
    assert resumed["structured_response"] == {"total": 3}
    metadata = [c.metadata for c in graph.get_state_history({"configurable": {"thread_id": "r"}})]
    assert all("response_format" not in m for m in metadata)  # sent as an object: not copied


def test_the_offline_model_fills_a_schema_that_refers_to_itself() -> None:
    from graph.models.offline import filled

    looped = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"$ref": "#/$defs/n"}},
    }
    assert filled(looped, "text") == {"a": None}  # the chain of references stops somewhere


def test_a_run_schema_that_cannot_work_fails_the_run_before_the_model(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    graph = agent(scripted([]), saver)
    with pytest.raises(ConfigError, match="must be a JSON schema"):
        run(graph, "x", response_format=["not", "a", "schema"])


class _SchemaHost(LoopbackServer):
    def handle(self, request: Request) -> Reply:
        return Reply(200, {"type": "integer"})


def test_a_schema_naming_anything_outside_it_is_refused_and_nothing_fetched(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    with _SchemaHost() as server:
        schema = {
            "title": "Remote",
            "type": "object",
            "properties": {"n": {"$ref": f"{server.url}/n.json"}},
        }
        graph = agent(scripted([]), saver)
        with pytest.raises(ConfigError, match="outside the schema: only references inside it"):
            run(graph, "n?", response_format=schema)
        assert server.requests == []


def test_a_pattern_matches_in_linear_time_and_look_around_is_refused(
    scripted: Callable[..., ScriptedModel], saver: BaseCheckpointSaver[Any]
) -> None:
    # With a backtracking engine this answer takes longer than the universe has left.
    schema = {"title": "Word", "type": "object", "properties": {"w": {"pattern": "^(a+)+$"}}}
    model = scripted([tool_call("Word", w="a" * 5_000 + "!")])
    result = run(agent(model, saver, output_retries=0), "a word?", response_format=schema)
    assert result["stop_reason"] == "invalid_output"
    assert 'does not match "^(a+)+$"' in result["messages"][-2].text
    looking = {"type": "object", "properties": {"w": {"pattern": "(?=a)"}}}
    with pytest.raises(ConfigError, match="cannot be used"):
        response_format(looking)


def test_the_offline_model_fills_a_schema_the_same_way_every_time(
    saver: BaseCheckpointSaver[Any],
) -> None:
    from tools import TOOLS

    graph = build_graph(
        model=OfflineModel(), tools=TOOLS, checkpointer=saver, response_format=SUM_SCHEMA
    )
    first = run(graph, "what is 150 * 3", "a")
    again = run(graph, "what is 150 * 3", "b")

    assert (
        first["structured_response"]
        == again["structured_response"]
        == {
            "total": 450,
            "unit": "m",
        }
    )
    assert [m.name for m in first["messages"] if isinstance(m, ToolMessage)] == [
        "calculator",
        "Sum",
    ]
    assert isinstance(first["messages"][0], HumanMessage)

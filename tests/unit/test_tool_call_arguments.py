"""`ferry tools call`'s argument check, and its one-call model through `build_graph`."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.cli.agent import UsageError
from graph.cli.tool_args import check_arguments, parse_arguments
from graph.models.one_call import AsksForOneCall
from tools import TOOLS

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "anything": {},
    },
    "required": ["count"],
}


def _echo(**arguments: Any) -> str:
    return repr(arguments)


def json_schema_tool(schema: dict[str, Any]) -> StructuredTool:
    """A tool described by JSON Schema, as MCP tools are."""
    return StructuredTool(name="probe", description="A probe.", args_schema=schema, func=_echo)


@pytest.mark.parametrize(
    "arguments",
    [
        {"count": 1},
        {"count": 2.0, "ratio": 1, "flag": False, "label": None, "tags": [], "anything": [1]},
        {"count": -3, "ratio": 0.5, "label": "x", "anything": {"a": 1}},
    ],
)
def test_json_schema_arguments_that_fit_pass(arguments: dict[str, Any]) -> None:
    check_arguments(json_schema_tool(SCHEMA), arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "probe needs the argument 'count' (integer) (see ferry tools)"),
        ({"count": True}, "argument 'count' for probe must be integer, not boolean"),
        ({"count": 1.5}, "argument 'count' for probe must be integer, not number"),
        ({"count": 1, "ratio": "1"}, "argument 'ratio' for probe must be number, not string"),
        ({"count": 1, "label": 3}, "argument 'label' for probe must be string or null, "
         "not integer"),
        ({"count": 1, "tags": "a"}, "argument 'tags' for probe must be array, not string"),
        ({"count": 1, "cuont": 1}, "unknown argument 'cuont' for probe; did you mean 'count'?"),
        ({"count": 1, "zzz": 1}, "unknown argument 'zzz' for probe (its arguments: count, ratio, "
         "flag, label, tags, anything)"),
    ],
)  # fmt: skip
def test_json_schema_arguments_that_do_not_fit_name_the_field(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as refused:
        check_arguments(json_schema_tool(SCHEMA), arguments)
    assert str(refused.value) == message


def test_a_schema_that_allows_more_properties_takes_them() -> None:
    check_arguments(
        json_schema_tool({**SCHEMA, "additionalProperties": True}), {"count": 1, "x": 2}
    )


def test_a_pydantic_schema_is_validated_as_the_tool_will() -> None:
    read_file = next(t for t in TOOLS if t.name == "read_file")
    check_arguments(read_file, {"path": "notes.txt", "start_line": 3})
    with pytest.raises(UsageError) as refused:
        check_arguments(read_file, {"path": "notes.txt", "start_line": "third"})
    assert str(refused.value).startswith("argument 'start_line' for read_file: Input should be")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the arguments for probe are not JSON (Expecting value at character 0)"),
        ("3", "the arguments for probe must be a JSON object, not int"),
        ("null", "the arguments for probe must be a JSON object, not NoneType"),
    ],
)
def test_arguments_must_be_one_json_object(text: str, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_arguments(text, json_schema_tool(SCHEMA))
    assert str(refused.value).startswith(message)


def test_the_one_call_model_asks_for_its_call_then_ends_the_turn_through_the_graph() -> None:
    calculator = next(t for t in TOOLS if t.name == "calculator")
    model = AsksForOneCall(tool="calculator", args={"expression": "2 ** 5"})
    graph = build_graph(model=model, tools=[calculator], checkpointer=InMemorySaver())

    state = graph.invoke(
        {"messages": [("user", "ferry tools call calculator")]},
        {"configurable": {"thread_id": "t1"}},
    )

    human, asked, result, answer = state["messages"]
    assert isinstance(human, HumanMessage) and isinstance(answer, AIMessage)
    assert isinstance(asked, AIMessage) and isinstance(result, ToolMessage)
    assert asked.tool_calls == [
        {"name": "calculator", "args": {"expression": "2 ** 5"}, "id": model.call_id,
         "type": "tool_call"},
    ]  # fmt: skip
    assert (result.tool_call_id, result.status, result.text) == (model.call_id, "success", "32")
    assert (answer.text, answer.tool_calls, state["stop_reason"]) == ("", [], "answered")
    assert model.result_seen is not None and "\n32\n" in model.result_seen  # fenced

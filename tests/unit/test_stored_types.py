"""What is stored reads back: every type the allowlist holds comes back through the saver, and a
value it would refuse is refused when written, before anything is stored."""

from __future__ import annotations

import importlib
import inspect
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.load.mapping import SERIALIZABLE_MAPPING
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from graph.storage import FerrySaver
from graph.storage.codec.serde import FerrySerializer, UnstorableValueError
from graph.storage.codec.stored_types import ALLOWED
from tests.support.stored_types import DATETIME, EXAMPLES, same

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
# LangGraph's own serializer, told to load these types without its "unregistered type" warning:
# what it gives back is what Ferry must give back.
LANGGRAPH = JsonPlusSerializer(allowed_msgpack_modules=list(EXAMPLES))
_DATA_MODULES = ("agents", "documents", "messages", "outputs", "prompt_values")


class Receipt(BaseModel):
    """A class of the application's own, which no allowlist names unless it is passed."""

    amount: int


def _saver(tmp_path: Path, serde: FerrySerializer | None = None) -> FerrySaver:
    conn = sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False)
    return FerrySaver(conn, serde) if serde else FerrySaver(conn)


def _langchain_class(path: tuple[str, ...]) -> type:
    return getattr(importlib.import_module(".".join(path[:-1])), path[-1])  # type: ignore[no-any-return]


def test_the_table_holds_langchains_data_classes_and_langgraphs_safe_types() -> None:
    data_paths = {
        path
        for path in SERIALIZABLE_MAPPING.values()
        if path[0] == "langchain_core" and path[1] in _DATA_MODULES
    }
    data = {_langchain_class(path) for path in data_paths}
    concrete = {cls for cls in data if not inspect.isabstract(cls)}
    assert concrete <= set(ALLOWED.values())
    safe = {entry for entry in SAFE_MSGPACK_TYPES if entry[0].startswith("langchain_core.")}
    assert safe <= ALLOWED.keys()


def test_templates_parsers_and_runnables_stay_out() -> None:
    """They are behaviour, not data: a jinja2 template runs code when it is formatted."""
    behaviour = {
        path
        for path in SERIALIZABLE_MAPPING.values()
        if path[0] == "langchain_core" and path[1] in ("prompts", "output_parsers", "runnables")
    }
    assert not {(".".join(path[:-1]), path[-1]) for path in behaviour} & ALLOWED.keys()


@pytest.mark.parametrize("cls", list(EXAMPLES), ids=lambda cls: cls.__name__)
def test_each_allowed_type_comes_back_through_the_saver(tmp_path: Path, cls: type) -> None:
    value = EXAMPLES[cls]
    saver = _saver(tmp_path)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"value": value}
    saved = saver.put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})
    saver.put_writes(saved, [("value", value)], task_id="task1")

    found = _saver(tmp_path).get_tuple({"configurable": {"thread_id": "t1"}})

    expected = LANGGRAPH.loads_typed(LANGGRAPH.dumps_typed(value))
    assert found is not None and found.pending_writes is not None
    assert type(expected) is cls
    assert same(found.checkpoint["channel_values"]["value"], expected)
    [(_, channel, written)] = found.pending_writes
    assert channel == "value" and same(written, expected)


def test_a_datetime_comes_back_through_the_saver(tmp_path: Path) -> None:
    saver = _saver(tmp_path)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"at": DATETIME}
    saver.put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})
    found = _saver(tmp_path).get_tuple({"configurable": {"thread_id": "t1"}})
    assert found is not None and found.checkpoint["channel_values"]["at"] == DATETIME


@pytest.mark.parametrize(
    "value",
    [
        Receipt(amount=3),
        {"nested": [{"deep": Receipt(amount=3)}]},
        [AgentAction(tool="t", tool_input="x", log=""), Receipt(amount=3)],
    ],
    ids=["itself", "nested", "beside an allowed type"],
)
def test_a_foreign_type_is_refused_at_put_and_the_thread_keeps_its_last_checkpoint(
    tmp_path: Path, value: Any
) -> None:
    saver = _saver(tmp_path)
    first = empty_checkpoint()
    first["channel_values"] = {"value": 1}
    saved = saver.put(CONFIG, first, {"source": "loop", "step": 1}, {})
    refused = empty_checkpoint()
    refused["channel_values"] = {"value": value}

    with pytest.raises(UnstorableValueError) as put_error:
        saver.put(saved, refused, {"source": "loop", "step": 2}, {})
    with pytest.raises(UnstorableValueError) as writes_error:
        saver.put_writes(saved, [("value", value)], task_id="task1")

    for error in (put_error, writes_error):
        assert str(error.value) == (
            "refused to store a value of type test_stored_types.Receipt: Ferry would refuse to "
            "load it on every later read; to store it, pass its class in "
            "FerrySerializer(allowed_types=[...]) (docs/threads.md: Stored data)"
        )
    reopened = _saver(tmp_path)
    found = reopened.get_tuple({"configurable": {"thread_id": "t1"}})
    assert found is not None and found.checkpoint["id"] == first["id"]
    assert found.checkpoint["channel_values"] == {"value": 1} and found.pending_writes == []
    assert len(list(reopened.list(None))) == 1


def test_a_template_is_refused_at_put(tmp_path: Path) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"prompt": ChatPromptTemplate.from_messages([("human", "{q}")])}
    with pytest.raises(UnstorableValueError, match=r"prompts\.chat\.ChatPromptTemplate"):
        _saver(tmp_path).put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})
    checkpoint["channel_values"] = {"prompt": PromptTemplate.from_template("{q}")}
    with pytest.raises(UnstorableValueError, match=r"prompts\.prompt\.PromptTemplate"):
        _saver(tmp_path).put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})


class AgentState(TypedDict, total=False):
    steps: Annotated[list[Any], operator.add]


def _agent(saver: FerrySaver, produce: list[Any]) -> Any:
    """A graph whose one node appends the next of `produce` to its state's steps."""

    def act(state: AgentState) -> AgentState:
        return {"steps": [produce.pop(0)]}

    builder = StateGraph(AgentState)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    return builder.compile(checkpointer=saver)


def test_a_state_holding_langchains_agent_types_continues_turn_after_turn(tmp_path: Path) -> None:
    action = AgentAction(tool="calculator", tool_input="6*7", log="")
    finish = AgentFinish(return_values={"output": "42"}, log="done")
    config = {"configurable": {"thread_id": "agent"}}
    _agent(_saver(tmp_path), [action]).invoke({"steps": []}, config)

    again = _agent(_saver(tmp_path), [finish])  # a new process, say
    assert again.invoke({"steps": []}, config)["steps"] == [action, finish]
    assert again.get_state(config).values["steps"] == [action, finish]


def test_a_node_returning_a_foreign_type_fails_the_run_and_the_next_turn_works(
    tmp_path: Path,
) -> None:
    config = {"configurable": {"thread_id": "agent"}}
    graph = _agent(_saver(tmp_path), ["first", Receipt(amount=3), "third"])
    graph.invoke({"steps": []}, config)

    with pytest.raises(UnstorableValueError, match=r"test_stored_types\.Receipt: .*allowed_types"):
        graph.invoke({"steps": []}, config)

    reopened = _agent(_saver(tmp_path), ["third"])
    # Every stored step still reads: the refused write was never stored, and the head is the
    # failed run's step before its node, holding what the first turn left.
    head, *earlier = reopened.get_state_history(config)
    assert head.values == {"steps": ["first"]} and head.next == ("act",)
    assert [step.values for step in earlier][:1] == [{"steps": ["first"]}]
    assert reopened.invoke({"steps": []}, config)["steps"] == ["first", "third"]


def test_a_foreign_type_passed_in_allowed_types_is_stored_and_loads(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "agent"}}
    serde = FerrySerializer(allowed_types=[Receipt])
    _agent(_saver(tmp_path, serde), [Receipt(amount=3)]).invoke({"steps": []}, config)
    state = _agent(_saver(tmp_path, FerrySerializer(allowed_types=[Receipt])), []).get_state(config)
    assert state.values == {"steps": [Receipt(amount=3)]}

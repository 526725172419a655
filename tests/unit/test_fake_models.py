"""LangChain's own fake chat models run through `build_graph`; without tools none is bound.

Their `bind_tools` is LangChain's unimplemented default, so with tools the graph refuses to build
with one line naming the model class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph
from graph.core.settings import ConfigError
from graph.storage import sqlite_saver
from tests.support.turns import ask

FAKES: dict[str, Callable[[], BaseChatModel]] = {
    "GenericFakeChatModel": lambda: GenericFakeChatModel(messages=iter([AIMessage("hi")])),
    "FakeMessagesListChatModel": lambda: FakeMessagesListChatModel(responses=[AIMessage("hi")]),
}


@tool
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: what to echo.
    """
    return text


@pytest.fixture(params=["memory", "ferry"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's `InMemorySaver`, or Ferry's saver on a file under `tmp_path`."""
    if request.param == "memory":
        yield InMemorySaver()
        return
    ferry = sqlite_saver(tmp_path / "f.db")
    yield ferry
    ferry.conn.close()


@pytest.mark.parametrize("name", FAKES)
def test_a_fake_model_answers_without_tools(name: str, saver: BaseCheckpointSaver[Any]) -> None:
    graph = build_graph(model=FAKES[name](), tools=[], checkpointer=saver)

    state = ask(graph, "hello")

    assert [type(m) for m in state["messages"]] == [HumanMessage, AIMessage]
    assert state["messages"][-1].content == "hi"


@pytest.mark.parametrize("name", FAKES)
def test_a_fake_model_streams_without_tools(name: str, saver: BaseCheckpointSaver[Any]) -> None:
    graph = build_graph(model=FAKES[name](), tools=[], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t1"}}

    list(graph.stream({"messages": [("user", "hello")]}, config))

    messages = graph.get_state(config).values["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage]
    assert messages[-1].content == "hi"


@pytest.mark.parametrize("name", FAKES)
def test_a_fake_model_with_tools_fails_at_build_naming_its_class(name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_graph(model=FAKES[name](), tools=[echo], checkpointer=InMemorySaver())

    assert str(raised.value) == (
        f"{name} cannot call tools (its bind_tools is not implemented): "
        "pass tools=[] or a model that supports tool calling"
    )
    assert "\n" not in str(raised.value)

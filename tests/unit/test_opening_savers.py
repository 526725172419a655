"""Every saver is opened in `graph.storage`, handed its `messages` reducer by the layer above.

No reducer is registered anywhere for storage to fall back on: a saver opened without one
leaves the folding to LangGraph (the graph's own reducer), and `build_graph` hands a Ferry
saver made without one Ferry's, so `build_graph(checkpointer=sqlite_saver(path))` folds as
Ferry's graph does.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from graph.builder import build_graph
from graph.core.settings import Settings
from graph.state import fold_messages
from graph.storage import default_saver, open_async_saver, open_saver, sqlite_saver
from graph.storage.history import folding
from tests.support.scripted import ScriptedModel

CONFIG: Any = {"configurable": {"thread_id": "t"}}


def _own_fold(messages: list[Any], updates: Any) -> list[Any]:
    return fold_messages(messages, updates)


def _add_each(messages: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    for write in writes:
        messages = add_messages(messages, write)
    return messages


class _Chat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_each)]


def _echo_graph(saver: Any) -> Any:
    builder = StateGraph(_Chat)
    builder.add_node("echo", lambda state: {"messages": [("ai", f"#{len(state['messages'])}")]})
    builder.add_edge("__start__", "echo")
    return builder.compile(checkpointer=saver)


def test_storage_keeps_no_reducer_of_its_own() -> None:
    # Only the reducer's type: nothing that registers one, nothing that holds one.
    names = [name for name in vars(folding) if not name.startswith("__")]
    assert [name for name in names if inspect.isfunction(vars(folding)[name])] == []
    assert [name for name in names if isinstance(vars(folding)[name], list | dict)] == []


def test_a_saver_opened_without_a_reducer_leaves_the_folding_to_langgraph(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    saver = sqlite_saver(db)
    assert saver.fold is None
    graph = _echo_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, CONFIG)
    graph.invoke({"messages": [("user", "two")]}, CONFIG)
    cold = _echo_graph(sqlite_saver(db))
    texts = [m.content for m in cold.get_state(CONFIG).values["messages"]]
    assert texts == ["one", "#1", "two", "#3"]


def test_build_graph_hands_its_reducer_to_a_ferry_saver_opened_without_one(
    tmp_path: Path,
) -> None:
    bare, own = sqlite_saver(tmp_path / "a.db"), sqlite_saver(tmp_path / "b.db", fold=_own_fold)
    build_graph(model=ScriptedModel([]), tools=[], checkpointer=bare)
    build_graph(model=ScriptedModel([]), tools=[], checkpointer=own)
    assert bare.fold is fold_messages
    assert own.fold is _own_fold  # one handed in is kept


def test_the_settings_factories_hand_the_saver_the_reducer_they_are_given(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "ferry.db")
    assert default_saver(settings, fold=_own_fold).fold is _own_fold
    assert default_saver(settings).fold is None
    with open_saver(settings, fold=_own_fold) as saver:
        assert saver.fold is _own_fold

    async def served() -> Any:
        async with open_async_saver(settings, fold=_own_fold) as saver:
            return saver.fold, saver.is_setup

    assert asyncio.run(served()) == (_own_fold, True)


def test_build_graph_opens_its_default_saver_with_ferrys_reducer(tmp_path: Path) -> None:
    graph = build_graph(
        model=ScriptedModel([]), tools=[], settings=Settings(db=tmp_path / "ferry.db")
    )
    assert graph.checkpointer.fold is fold_messages  # type: ignore[union-attr]

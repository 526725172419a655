"""Every entry point gives the same run guarantees (issue 15 §1 and §5).

Each guarantee is proved through `invoke`, `stream`, `ainvoke`, `astream`, `astream_events` and
the server's path: the graph `langgraph.json` serves (compiled without a checkpointer) handed
the server's async saver per run, the way langgraph-api does (`graph.copy(update=...)`, then
`astream_events` with its own `durability="async"`). The model is the real ChatOpenAI client
on the loopback OpenAI server, which answers 400 to a history with a dangling or duplicate
tool result; the thread lives in a SQLite file. A crash is a saver whose checkpoint write
dies right after the step's writes were stored ("killed between writes and checkpoint").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI

from graph import build_graph
from graph.builder import _compile  # the served graph's own recipe, on this module's tools
from graph.core.settings import Settings
from graph.guards import INTERRUPTED
from graph.server.checkpointer import checkpointer as server_checkpointer
from graph.state import fold_messages
from graph.storage import FerrySaver, connect, sqlite_saver
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls

ENTRY_POINTS = ["invoke", "stream", "ainvoke", "astream", "astream_events", "server"]
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t1"}}
RAN: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    RAN.append(f"lookup {key}")
    return f"{key}={len(key)}"


@tool
def pay(amount: int) -> str:
    """Send a payment.

    Args:
        amount: how much.
    """
    RAN.append(f"pay {amount}")
    return "paid"


pay.metadata = {"retry_safe": False}


@tool
def peek(what: str) -> str:
    """Say whether this call was stored before it started.

    Args:
        what: anything.
    """
    # The run's file, through another connection, folding as the run's saver does.
    saver = sqlite_saver(Path("ferry.db"), fold=fold_messages)
    try:
        stored = saver.get_tuple(CONFIG)
        assert stored is not None
        messages = stored.checkpoint["channel_values"].get("messages") or []
        history = saver.get_delta_channel_history(config=stored.config, channels=["messages"])
        seed = history["messages"].get("seed") or messages
    finally:
        saver.conn.close()
    calls = [c["id"] for m in seed if isinstance(m, AIMessage) for c in m.tool_calls]
    return "stored" if calls else "not stored"


TOOLS: list[BaseTool] = [lookup, pay, peek]


class Killed(BaseException):
    """The process died (a SIGKILL, in effect) while saving a checkpoint."""


class KilledAtStep(FerrySaver):
    """A saver that dies writing the checkpoint of `step`, after that step's writes were saved."""

    def __init__(self, path: Path, step: int) -> None:
        super().__init__(connect(path))
        self.step = step

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("step") == self.step:
            raise Killed
        return super().put(config, checkpoint, metadata, new_versions)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    RAN.clear()
    with OpenAIServer() as running:
        yield running
        running.assert_complete()
    assert running.rejections == [], running.rejections


def model(server: OpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4.1-mini",
        base_url=server.url + "/v1",
        api_key="sk-test-entry",  # type: ignore[arg-type]  # a SecretStr is also accepted
        max_retries=0,
    )


def setup_graph(server: OpenAIServer, saver: FerrySaver | None = None) -> Any:
    """A graph on the thread's file, to bring the thread where a test needs it."""
    saver = saver or sqlite_saver(Path("ferry.db"))
    saver.setup()
    return build_graph(model=model(server), tools=TOOLS, checkpointer=saver, settings=Settings())


def run(entry: str, server: OpenAIServer, graph_input: Any) -> list[BaseMessage]:
    """One run through `entry`; the thread's stored messages afterwards."""
    if entry == "server":
        return asyncio.run(_served(server, graph_input))
    graph = build_graph(
        model=model(server), tools=TOOLS, checkpointer=sqlite_saver(Path("ferry.db"))
    )
    if entry == "invoke":
        graph.invoke(graph_input, CONFIG)
    elif entry == "stream":
        for _ in graph.stream(graph_input, CONFIG, stream_mode=["updates", "messages"]):
            pass
    else:
        asyncio.run(_async_run(entry, graph, graph_input))
    return list(graph.get_state(CONFIG).values["messages"])


async def _async_run(entry: str, graph: Any, graph_input: Any) -> None:
    if entry == "ainvoke":
        await graph.ainvoke(graph_input, CONFIG)
    elif entry == "astream":
        async for _ in graph.astream(graph_input, CONFIG, stream_mode=["updates", "messages"]):
            pass
    else:
        async for _ in graph.astream_events(graph_input, CONFIG, version="v2"):
            pass


async def _served(server: OpenAIServer, graph_input: Any) -> list[BaseMessage]:
    """The run as langgraph-api makes it: the served graph copied with the server's saver."""
    served = _compile(Settings(), model(server), TOOLS, None, None, memory=False)
    async with server_checkpointer() as saver:
        graph = served.copy(update={"checkpointer": saver})
        events = graph.astream_events(
            graph_input,
            CONFIG,
            version="v2",
            stream_mode=["values", "updates", "messages"],
            durability="async",  # langgraph-api's default
            context=None,
        )
        async for _ in events:
            pass
        return list((await graph.aget_state(CONFIG)).values["messages"])


def shape(messages: list[BaseMessage]) -> list[str]:
    return [
        f"tool {m.tool_call_id}" if isinstance(m, ToolMessage) else type(m).__name__
        for m in messages
    ]


def ask(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_each_step_is_stored_before_the_next_starts(entry: str, server: OpenAIServer) -> None:
    server.script([openai_tool_calls(("peek", {"what": "me"}, "c1")), openai_answer("done")])
    messages = run(entry, server, ask("peek"))
    assert shape(messages) == ["HumanMessage", "AIMessage", "tool c1", "AIMessage"]
    assert messages[2].content == "stored"  # the reply with its call was saved before the tool ran


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_results_that_finished_before_a_kill_are_kept_under_new_input(
    entry: str, server: OpenAIServer
) -> None:
    server.script(
        [
            openai_tool_calls(("lookup", {"key": "abc"}, "c1")),
            openai_answer("the first is abc=3, the second ok"),
        ]
    )
    with pytest.raises(Killed):  # after execute_tool wrote its result, before its checkpoint
        setup_graph(server, KilledAtStep(Path("ferry.db"), step=3)).invoke(ask("abc?"), CONFIG)
    messages = run(entry, server, ask("and then?"))
    assert shape(messages) == ["HumanMessage", "AIMessage", "tool c1", "HumanMessage", "AIMessage"]
    assert messages[2].content == "abc=3"  # kept, not answered "no result"
    assert RAN == ["lookup abc"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_model_reply_stored_before_a_kill_is_kept_under_new_input(
    entry: str, server: OpenAIServer
) -> None:
    server.script([openai_answer("first answer"), openai_answer("second answer")])
    with pytest.raises(Killed):  # after call_model wrote its reply, before its checkpoint
        setup_graph(server, KilledAtStep(Path("ferry.db"), step=1)).invoke(ask("one"), CONFIG)
    messages = run(entry, server, ask("two"))
    assert [(type(m).__name__, m.content) for m in messages] == [
        ("HumanMessage", "one"),
        ("AIMessage", "first answer"),
        ("HumanMessage", "two"),
        ("AIMessage", "second answer"),
    ]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_side_effect_call_cut_short_is_not_run_again(entry: str, server: OpenAIServer) -> None:
    server.script([openai_tool_calls(("pay", {"amount": 5}, "c1")), openai_answer("unsure")])
    saver = sqlite_saver(Path("ferry.db"))
    setup_graph(server, saver).invoke(ask("pay 5"), CONFIG, interrupt_before=["execute_tool"])
    assert saver.first_start("t1", "c1")  # the crashed run had started the call
    messages = run(entry, server, None)
    assert shape(messages) == ["HumanMessage", "AIMessage", "tool c1", "AIMessage"]
    assert "not re-run automatically" in messages[2].content
    assert RAN == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_unanswered_calls_are_answered_in_place_before_new_input(
    entry: str, server: OpenAIServer
) -> None:
    server.script([openai_tool_calls(("lookup", {"key": "abc"}, "c1")), openai_answer("ok")])
    setup_graph(server).invoke(ask("abc?"), CONFIG, interrupt_before=["execute_tool"])
    messages = run(entry, server, ask("never mind"))
    assert shape(messages) == ["HumanMessage", "AIMessage", "tool c1", "HumanMessage", "AIMessage"]
    assert messages[2].content == INTERRUPTED
    assert RAN == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("left", ["a question", "calls"])
def test_a_run_without_input_completes_a_turn_nothing_is_planned_for(
    entry: str, left: str, server: OpenAIServer
) -> None:
    server.script([openai_answer("hello"), openai_answer("ab=2 and xyz=3")])
    graph = setup_graph(server)
    graph.invoke(ask("hi"), CONFIG)
    added: list[BaseMessage] = [HumanMessage("look ab and xyz up", id="h2")]
    if left == "calls":  # stored as if the model had made them
        calls = [("ab", "c2"), ("xyz", "c3")]
        tool_calls = [{"name": "lookup", "args": {"key": k}, "id": i} for k, i in calls]
        added.append(AIMessage("", id="a2", tool_calls=tool_calls))
    # As a Studio edit or a kill between writes and checkpoint leaves it: nothing planned.
    graph.update_state(CONFIG, {"messages": added}, as_node="check")
    assert graph.get_state(CONFIG).next == ()
    messages = run(entry, server, None)
    expected = ["HumanMessage", "AIMessage", "HumanMessage"]
    if left == "calls":
        expected += ["AIMessage", "tool c2", "tool c3"]
    assert shape(messages) == [*expected, "AIMessage"]
    assert messages[-1].content == "ab=2 and xyz=3"
    assert sorted(RAN) == (["lookup ab", "lookup xyz"] if left == "calls" else [])

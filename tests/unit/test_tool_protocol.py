"""LangChain's tool protocol through Ferry's graph: each kind of tool, in sync and async runs.

Tools are run as LangGraph's `ToolNode` runs them (graph/execution.py), inside Ferry's guards.
Each test drives the whole graph with a scripted model and checks what is stored and what the
model was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState, ToolRuntime
from langgraph.types import Command, interrupt

from graph.core.fence import fenced_data
from graph.core.run import RunContext
from graph.storage import sqlite_saver
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import answer, parallel, tool_call

CONFIG = {"configurable": {"thread_id": "t1"}}
RUNS: list[str] = []


@tool
def whoami(note: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Say which call this is.

    Args:
        note: anything.
    """
    return f"{note}: {tool_call_id}"


@tool
def count_messages(state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Count the messages of the conversation so far."""
    return f"{len(state['messages'])} messages"


@tool
def inspect_run(runtime: ToolRuntime[RunContext]) -> str:
    """Describe the run this call belongs to.

    Typed with Ferry's context: a bare `ToolRuntime` expects none, and pydantic warns.
    """
    return (
        f"call {runtime.tool_call_id}, {len(runtime.state['messages'])} messages, "
        f"run {runtime.context.run_id}"
    )


async def _slow_double(n: int) -> int:
    await asyncio.sleep(0.01)
    return 2 * n


double = StructuredTool.from_function(
    coroutine=_slow_double, name="double", description="Double a number (async only)."
)


async def _forever(n: int) -> int:
    await asyncio.sleep(30)
    return n


hang = StructuredTool.from_function(
    coroutine=_forever, name="hang", description="Never finishes (async only)."
)


@tool(response_format="content_and_artifact")
def measure(path: str) -> tuple[str, dict[str, Any]]:
    """Measure a file.

    Args:
        path: the file.
    """
    return f"{path} is 3 lines", {"path": path, "lines": [1, 2, 3], "raw": Path(path)}


@tool
def confirm_delete(record: str) -> str:
    """Delete a record after a person confirms.

    Args:
        record: the record.
    """
    answer_given = interrupt({"question": f"delete {record}?"})
    RUNS.append(f"delete {record}: {answer_given}")
    return f"deleted {record}" if answer_given == "yes" else f"kept {record}"


confirm_delete.metadata = {"retry_safe": False}


@tool
def finish_with_command(
    topic: str, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command[Any]:
    """Answer through a Command.

    Args:
        topic: the topic.
    """
    return Command(update={"messages": [ToolMessage(f"noted {topic}", tool_call_id=tool_call_id)]})


TOOLS = [whoami, count_messages, inspect_run, double, hang, measure, confirm_delete]


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


def run(graph: Any, graph_input: Any, mode: str) -> dict[str, Any]:
    """One run through `invoke`, `stream`, `ainvoke` or `astream`; the final state."""
    if mode == "invoke":
        return dict(graph.invoke(graph_input, CONFIG))
    if mode == "stream":
        for _ in graph.stream(graph_input, CONFIG, stream_mode="updates"):
            pass
        state = graph.get_state(CONFIG)
        return {**state.values, "__interrupt__": list(state.interrupts)}
    if mode == "astream":

        async def streamed() -> dict[str, Any]:
            async for _ in graph.astream(graph_input, CONFIG, stream_mode="updates"):
                pass
            state = await graph.aget_state(CONFIG)
            return {**state.values, "__interrupt__": list(state.interrupts)}

        return asyncio.run(streamed())
    return dict(asyncio.run(graph.ainvoke(graph_input, CONFIG)))


def result_of(state: dict[str, Any], index: int = 2) -> ToolMessage:
    message = state["messages"][index]
    assert isinstance(message, ToolMessage)
    return message


MODES = ["invoke", "stream", "ainvoke", "astream"]


@pytest.mark.parametrize("mode", MODES)
def test_injected_tool_call_id_is_the_call_s_own_and_hidden_from_the_model(
    scripted: Scripted, make_agent: Agent, mode: str
) -> None:
    model = scripted([tool_call("whoami", note="hi"), answer("ok")])
    state = run(make_agent(model, tools=TOOLS), {"messages": [("user", "who?")]}, mode)
    call_id = state["messages"][1].tool_calls[0]["id"]
    assert result_of(state).content == f"hi: {call_id}"
    assert result_of(state).status == "success"
    schema = whoami.tool_call_schema.model_json_schema()  # what bind_tools sends
    assert "tool_call_id" not in schema["properties"]


@pytest.mark.parametrize("mode", MODES)
def test_injected_state_and_tool_runtime_see_the_graph_state(
    scripted: Scripted, make_agent: Agent, mode: str
) -> None:
    model = scripted(
        [parallel(tool_call("count_messages"), tool_call("inspect_run")), answer("ok")]
    )
    graph = make_agent(model, tools=TOOLS)
    state = run(graph, {"messages": [("user", "how many?")]}, mode)
    counted, inspected = (result_of(state, i) for i in (2, 3))
    assert counted.content == "2 messages"  # the question and the reply that made the call
    call_id = state["messages"][1].tool_calls[1]["id"]
    assert inspected.content.startswith(f"call {call_id}, 2 messages, run ")
    assert "Field required" not in inspected.content


def test_invalid_arguments_never_name_injected_ones(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted([tool_call("whoami"), answer("ok")])
    state = run(make_agent(model, tools=TOOLS), {"messages": [("user", "who?")]}, "invoke")
    error = result_of(state)
    assert error.status == "error"
    assert error.content.startswith("Invalid arguments for whoami: note: Field required")
    assert "tool_call_id" not in error.content


@pytest.mark.parametrize("mode", MODES)
def test_async_only_tool_runs_in_every_kind_of_run(
    scripted: Scripted, make_agent: Agent, mode: str
) -> None:
    model = scripted([tool_call("double", n=21), answer("42")])
    state = run(make_agent(model, tools=TOOLS), {"messages": [("user", "double 21")]}, mode)
    assert (result_of(state).content, result_of(state).status) == ("42", "success")
    assert fenced_data(model.calls[1][-1].text) == "42"  # the model got the result, fenced


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_async_only_tool_is_bounded_by_the_timeout(
    scripted: Scripted, make_agent: Agent, mode: str
) -> None:
    model = scripted([tool_call("hang", n=1), answer("gave up")])
    graph = make_agent(model, tools=TOOLS, tool_timeout_s=0.2)
    state = run(graph, {"messages": [("user", "hang")]}, mode)
    assert result_of(state).status == "error"
    assert "hang timed out after 0.2 s" in result_of(state).content


@pytest.mark.parametrize("mode", MODES)
def test_artifact_is_kept_as_data_and_only_the_content_is_sent(
    scripted: Scripted, make_agent: Agent, tmp_path: Path, mode: str
) -> None:
    model = scripted([tool_call("measure", path="a.txt"), answer("3 lines")])
    saver = sqlite_saver(tmp_path / "t.db")
    run(make_agent(model, checkpointer=saver, tools=TOOLS), {"messages": [("user", "m")]}, mode)
    # Read back in a new graph: what the database holds, not what is in memory.
    reread = make_agent(scripted([]), checkpointer=sqlite_saver(tmp_path / "t.db"), tools=TOOLS)
    stored = result_of(reread.get_state(CONFIG).values)
    assert stored.content == "a.txt is 3 lines"
    assert stored.artifact == {"path": "a.txt", "lines": [1, 2, 3], "raw": "a.txt"}
    sent = model.calls[1][-1]
    assert "[1, 2, 3]" not in sent.text and sent.artifact == stored.artifact


@pytest.mark.parametrize("mode", MODES)
def test_interrupt_in_a_tool_pauses_the_run_and_the_answer_resumes_it(
    scripted: Scripted, make_agent: Agent, tmp_path: Path, mode: str
) -> None:
    model = scripted([tool_call("confirm_delete", record="r1"), answer("deleted")])
    # A side-effecting tool (retry_safe=False) on a saver that records starts: pausing is
    # not a crash, so the resumed call runs instead of being refused as cut short.
    graph = make_agent(model, checkpointer=sqlite_saver(tmp_path / "t.db"), tools=TOOLS)
    paused = run(graph, {"messages": [("user", "delete r1")]}, mode)
    assert [i.value for i in paused["__interrupt__"]] == [{"question": "delete r1?"}]
    assert len(paused["messages"]) == 2 and RUNS == []  # the call is pending, not answered
    state = run(graph, Command(resume="yes"), mode)
    assert RUNS == ["delete r1: yes"]
    assert (result_of(state).content, result_of(state).status) == ("deleted r1", "success")
    assert state["messages"][-1].content == "deleted"


def test_tool_returning_a_command_updates_the_state(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted([tool_call("finish_with_command", topic="x"), answer("done")])
    graph = make_agent(model, tools=[*TOOLS, finish_with_command])
    state = run(graph, {"messages": [("user", "note x")]}, "invoke")
    stored = result_of(state)
    assert (stored.content, stored.name, stored.status) == (
        "noted x",
        "finish_with_command",
        "success",
    )
    assert stored.id and stored.response_metadata["duration_ms"] >= 0
    assert model.calls[1][-1].tool_call_id == state["messages"][1].tool_calls[0]["id"]


def test_a_command_without_the_call_s_result_is_an_error_result(
    scripted: Scripted, make_agent: Agent
) -> None:
    @tool
    def forgetful() -> Command[Any]:
        """Return a Command that answers nothing."""
        return Command(update={"messages": []})

    model = scripted([tool_call("forgetful"), answer("hm")])
    state = run(make_agent(model, tools=[forgetful]), {"messages": [("user", "go")]}, "invoke")
    assert result_of(state).status == "error"
    assert result_of(state).content.startswith("forgetful failed unexpectedly (ValueError")


def test_in_memory_runs_work_without_start_records(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted([tool_call("confirm_delete", record="r2"), answer("kept")])
    graph = make_agent(model, checkpointer=InMemorySaver(), tools=TOOLS)
    graph.invoke({"messages": [("user", "delete r2")]}, CONFIG)
    state = graph.invoke(Command(resume="no"), CONFIG)
    assert result_of(state).content == "kept r2"


def test_secrets_in_an_artifact_are_redacted_before_storage(
    scripted: Scripted, make_agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAYMENTS_API_KEY", "sk-live-0123456789abcdef")

    @tool(response_format="content_and_artifact")
    def leaky() -> tuple[str, dict[str, Any]]:
        """Return a header in the artifact."""
        return "ok", {"headers": {"Authorization": "Bearer sk-live-0123456789abcdef"}, "n": 1}

    model = scripted([tool_call("leaky"), answer("ok")])
    state = run(make_agent(model, tools=[leaky]), {"messages": [("user", "go")]}, "invoke")
    artifact = result_of(state).artifact
    assert "sk-live-0123456789abcdef" not in json.dumps(artifact)
    assert artifact["n"] == 1 and "[redacted]" in artifact["headers"]["Authorization"]


EXITS_AFTER_A_TIMEOUT = """
import time
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from graph import build_graph
from graph.core.settings import Settings
from tests.support.scripted import ScriptedModel, answer, tool_call

@tool
def stuck(n: int) -> int:
    \"\"\"Block far longer than the test waits.\"\"\"
    time.sleep(600)
    return n

model = ScriptedModel([tool_call("stuck", n=1), answer("gave up")])
graph = build_graph(
    model=model, tools=[stuck], checkpointer=InMemorySaver(), settings=Settings(tool_timeout_s=0.2)
)
state = graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t"}})
print(state["messages"][2].status)
"""


def test_a_process_exits_although_a_timed_out_tool_still_runs() -> None:
    # ToolNode runs sync tools on a thread pool the interpreter joins at exit; the call that
    # overran must be left on a daemon thread, or this process would wait for it.
    done = subprocess.run(
        [sys.executable, "-c", EXITS_AFTER_A_TIMEOUT],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "error"), done.stderr

"""One test per loop behaviour, with a scripted model and small in-test tools.

Every model comes from the `scripted` fixture, which fails a test whose script was not played to
the end; graphs come from `make_agent`, on this module's TOOLS.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool

from graph.core.fence import fence_value, fenced_data
from graph.guards import turn_counters
from graph.storage import sqlite_saver
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import ScriptedModel, UnexpectedModelCall, answer, parallel, tool_call
from tests.support.turns import ask

CALLS: list[tuple[str, dict[str, Any]]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend.
        b: second addend.
    """
    CALLS.append(("add", {"a": a, "b": b}))
    return a + b


@tool
def weather(city: str) -> str:
    """Report the weather.

    Args:
        city: the city.
    """
    CALLS.append(("weather", {"city": city}))
    if city == "Atlantis":
        raise ToolException("City 'Atlantis' not found")
    return f"{city}: 21 °C"


@tool
def nap(seconds: float) -> str:
    """Sleep, then say so.

    Args:
        seconds: how long.
    """
    CALLS.append(("nap", {"seconds": seconds}))
    time.sleep(seconds)
    return f"slept {seconds}"


@tool
def broken(x: int) -> str:
    """Always fail with an unexpected error.

    Args:
        x: anything.
    """
    CALLS.append(("broken", {"x": x}))
    raise RuntimeError("disk on fire")


TOOLS: list[BaseTool] = [add, weather, nap, broken]


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return TOOLS


def kinds(messages: list[Any]) -> list[str]:
    return [type(m).__name__.removesuffix("Message") for m in messages]


def test_plain_answer_makes_one_model_call_and_no_tool_call(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([answer("Hello!")])
    result = ask(make_agent(model), "hi")
    assert kinds(result["messages"]) == ["Human", "AI"]
    assert result["messages"][-1].content == "Hello!"
    assert result["stop_reason"] == "answered"
    assert turn_counters(result["messages"])["model_calls"] == 1
    assert CALLS == []
    assert set(model.bound_tools) == {"add", "weather", "nap", "broken"}
    assert isinstance(model.calls[0][0], SystemMessage)


def test_one_tool_call_result_goes_back_to_the_model(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted([tool_call("add", a=2, b=3), answer("5")])
    result = ask(make_agent(model), "2+3?")
    assert kinds(result["messages"]) == ["Human", "AI", "Tool", "AI"]
    call_id = result["messages"][1].tool_calls[0]["id"]
    sent = model.calls[1]
    assert isinstance(sent[-1], ToolMessage)
    stored = result["messages"][2]
    assert stored.content == "5"  # stored as the tool returned it; fenced only when sent
    value = fence_value(stored)
    assert sent[-1].tool_call_id == call_id
    assert sent[-1].content == f'<tool_data fence="{value}">\n5\n</tool_data fence="{value}">'
    assert result["messages"][2].status == "success"


def test_three_parallel_calls_in_one_turn_each_get_one_result(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted(
        [
            parallel(
                tool_call("add", a=1, b=1),
                tool_call("weather", city="Madrid"),
                tool_call("add", a=2, b=2),
            ),
            answer("done"),
        ]
    )
    result = ask(make_agent(model), "three things")
    assert kinds(result["messages"]) == ["Human", "AI", "Tool", "Tool", "Tool", "AI"]
    ids = [c["id"] for c in result["messages"][1].tool_calls]
    answered = [m.tool_call_id for m in result["messages"] if isinstance(m, ToolMessage)]
    assert sorted(answered) == sorted(ids)
    sent = [fenced_data(str(m.content)) for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert sorted(str(text) for text in sent) == [
        "2",
        "4",
        "Madrid: 21 °C",
    ]


def test_parallel_calls_run_concurrently(scripted: Scripted, make_agent: Agent) -> None:
    # Each call waits for the other two: run one after another, the first would time out.
    meeting = threading.Barrier(3, timeout=10)

    @tool
    def meet(n: int) -> int:
        """Wait until the two other calls arrive.

        Args:
            n: a number.
        """
        meeting.wait()
        return n

    model = scripted([parallel(*(tool_call("meet", n=i) for i in range(3))), answer("ok")])
    result = ask(make_agent(model, tools=[meet]), "meet thrice")
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert sorted(m.content for m in results) == ["0", "1", "2"]
    assert {m.status for m in results} == {"success"}


def test_dependent_call_over_two_model_turns(scripted: Scripted, make_agent: Agent) -> None:
    def multiply_the_temperature(messages: list[Any]) -> AIMessage:
        temperature = int(str(fenced_data(messages[-1].content)).split(":")[1].split("°")[0])
        return tool_call("add", a=temperature, b=temperature)

    model = scripted([tool_call("weather", city="Madrid"), multiply_the_temperature, answer("42")])
    result = ask(make_agent(model), "double the temperature in Madrid")
    assert CALLS == [("weather", {"city": "Madrid"}), ("add", {"a": 21, "b": 21})]
    assert kinds(result["messages"]) == ["Human", "AI", "Tool", "AI", "Tool", "AI"]


def test_tool_error_becomes_error_result_and_the_run_continues(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("weather", city="Atlantis"), answer("No such city.")])
    result = ask(make_agent(model), "weather in Atlantis")
    error = result["messages"][2]
    assert error.status == "error" and error.content == "City 'Atlantis' not found"
    assert result["stop_reason"] == "answered"


def test_unexpected_exception_is_described_not_raised(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("broken", x=1), answer("sorry")])
    result = ask(make_agent(model), "break")
    error = result["messages"][2]
    assert error.status == "error"
    assert "RuntimeError: disk on fire" in error.content
    assert "Traceback" not in error.content


def test_unknown_tool_is_answered_with_the_available_tools(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("teleport", to="Mars"), answer("I cannot.")])
    result = ask(make_agent(model), "teleport me")
    error = result["messages"][2]
    assert error.status == "error"
    assert error.content.startswith("Unknown tool 'teleport'. Available tools: add, weather")
    assert CALLS == []


def test_invalid_arguments_say_what_was_wrong(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted([tool_call("add", a="two"), answer("oops")])
    result = ask(make_agent(model), "add")
    error = result["messages"][2]
    assert error.status == "error"
    assert error.content.startswith("Invalid arguments for add:")
    assert "a:" in error.content and "b: Field required" in error.content
    assert CALLS == []


def test_iteration_cap_stops_gracefully_and_answers_the_pending_calls(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("add", a=i, b=1) for i in range(3)])
    result = ask(make_agent(model, max_iterations=3), "loop forever")
    assert result["stop_reason"] == "max_iterations"
    assert turn_counters(result["messages"])["model_calls"] == 3
    assert len(CALLS) == 2  # the third call was refused, not run
    last_call, refusal, final = result["messages"][-3:]
    assert isinstance(last_call, AIMessage) and last_call.tool_calls
    assert isinstance(refusal, ToolMessage) and refusal.status == "error"
    assert isinstance(final, AIMessage) and "3 model calls" in str(final.content)


def test_second_turn_sees_the_first_and_other_threads_start_empty(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([answer("Hi Ada."), answer("You are Ada."), answer("Who?")])
    graph = make_agent(model)
    ask(graph, "I am Ada")
    result = ask(graph, "Who am I?")
    assert kinds(result["messages"]) == ["Human", "AI", "Human", "AI"]
    assert [m.content for m in model.calls[1][1:]] == ["I am Ada", "Hi Ada.", "Who am I?"]
    other = ask(graph, "Who am I?", thread="t2")
    assert kinds(other["messages"]) == ["Human", "AI"]
    assert [type(m) for m in model.calls[2][1:]] == [HumanMessage]


def test_threads_persist_in_sqlite_across_graph_instances(
    scripted: Scripted, make_agent: Agent, tmp_path: Path
) -> None:
    db = tmp_path / "threads.db"
    ask(make_agent(scripted([answer("first")]), sqlite_saver(db)), "one")
    model = scripted([answer("second")])
    result = ask(make_agent(model, sqlite_saver(db)), "two")
    assert [m.content for m in result["messages"]] == ["one", "first", "two", "second"]
    assert [m.content for m in model.calls[0][1:]] == ["one", "first", "two"]


def test_message_ids_are_stable_across_reads(
    scripted: Scripted, make_agent: Agent, tmp_path: Path
) -> None:
    graph = make_agent(
        scripted([tool_call("add", a=1, b=2), answer("3")]), sqlite_saver(tmp_path / "x.db")
    )
    result = ask(graph, "1+2")
    ids = [m.id for m in result["messages"]]
    assert all(ids) and len(set(ids)) == len(ids)
    again = graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    assert [m.id for m in again] == ids


@pytest.mark.off_script("over-calls the model to see it fail")
def test_overcalling_the_script_fails_loudly(make_agent: Agent) -> None:
    model = ScriptedModel([tool_call("add", a=1, b=2)])
    with pytest.raises(UnexpectedModelCall):
        ask(make_agent(model), "1+2")


def test_tool_timeout_answers_with_an_error_and_the_run_continues(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("nap", seconds=5), answer("too slow")])
    started = time.monotonic()
    result = ask(make_agent(model, tool_timeout_s=0.3), "nap")
    assert time.monotonic() - started < 3
    error = result["messages"][2]
    assert error.status == "error" and "timed out after 0.3 s" in error.content


def test_concurrency_is_bounded_by_max_parallel_tools(
    scripted: Scripted, make_agent: Agent
) -> None:
    running, peak = 0, 0
    both_ran = threading.Condition()

    @tool
    def slow(n: int) -> int:
        """Wait a little.

        Args:
            n: a number.
        """
        nonlocal running, peak
        with both_ran:
            running += 1
            peak = max(peak, running)
            both_ran.notify_all()
            # The first call waits for a second: the bound is reached, not hoped for.
            both_ran.wait_for(lambda: peak >= 2, timeout=10)
        time.sleep(0.05)  # a third call, were it let in, would overlap these
        with both_ran:
            running -= 1
        return n

    model = scripted([parallel(*(tool_call("slow", n=i) for i in range(5))), answer("ok")])
    ask(make_agent(model, tools=[slow], max_parallel_tools=2), "go")
    assert peak == 2

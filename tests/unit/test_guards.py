"""Each guard fires at the right moment, ends the turn with an answer, and survives resume."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from graph.core.log import JsonFormatter, redact
from graph.guards import turn_counters
from graph.state import merge_messages
from graph.storage import sqlite_saver
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call, with_usage
from tests.support.turns import ask

RUNS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    RUNS.append(key)
    if key.startswith("bad"):
        raise ValueError(f"no entry for {key}")
    return f"value of {key}"


@tool
def slow(seconds: float) -> str:
    """Wait.

    Args:
        seconds: how long.
    """
    RUNS.append(f"slow {seconds}")
    time.sleep(seconds)
    return "done"


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [lookup, slow]


def assert_every_call_answered_in_place(messages: list[Any]) -> None:
    """What providers require: each call's results follow its AIMessage, before anything else."""
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            block = []
            for later in messages[i + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                block.append(later.tool_call_id)
            assert sorted(block) == sorted(c["id"] for c in message.tool_calls)


def test_duplicate_call_in_a_turn_is_not_run_again_and_points_at_the_first(
    make_agent: Agent,
) -> None:
    model = ScriptedModel(
        [tool_call("lookup", key="a"), tool_call("lookup", key="a"), answer("value of a")]
    )
    result = ask(make_agent(model), "a?")
    assert RUNS == ["a"]
    first, duplicate = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert duplicate.status == "error"
    assert first.tool_call_id in duplicate.content and "value of a" in duplicate.content
    assert result["stop_reason"] == "answered"


def test_identical_parallel_calls_run_once(make_agent: Agent) -> None:
    model = ScriptedModel(
        [parallel(tool_call("lookup", key="a"), tool_call("lookup", key="a")), answer("ok")]
    )
    result = ask(make_agent(model), "a twice")
    assert RUNS == ["a"]
    statuses = sorted(m.status for m in result["messages"] if isinstance(m, ToolMessage))
    assert statuses == ["error", "success"]


def test_a_model_repeating_itself_is_stopped_by_duplicates_and_the_cap(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("lookup", key="a") for _ in range(4)])
    result = ask(make_agent(model, max_iterations=4), "loop")
    assert RUNS == ["a"]  # executed once; every repeat refused
    assert result["stop_reason"] == "max_iterations"
    assert isinstance(result["messages"][-1], AIMessage)
    assert_every_call_answered_in_place(result["messages"])


def test_same_call_in_a_new_turn_runs_again(make_agent: Agent) -> None:
    model = ScriptedModel(
        [tool_call("lookup", key="a"), answer("1"), tool_call("lookup", key="a"), answer("2")]
    )
    graph = make_agent(model)
    ask(graph, "a?")
    ask(graph, "a again?")
    assert RUNS == ["a", "a"]


def test_circuit_breaker_disables_a_failing_tool_for_the_thread(
    make_agent: Agent, tmp_path: Path
) -> None:
    saver = sqlite_saver(tmp_path / "b.db")
    steps: list[Any] = []
    for i in range(4):
        steps += [tool_call("lookup", key=f"bad{i}"), answer(f"failed {i}")]
    graph = make_agent(ScriptedModel(steps), saver, breaker_threshold=3)
    results = [ask(graph, f"try {i}") for i in range(4)]
    assert RUNS == ["bad0", "bad1", "bad2"]  # the fourth call was refused without running
    refusal = [m for m in results[-1]["messages"] if isinstance(m, ToolMessage)][-1]
    assert refusal.status == "error"
    assert "lookup is disabled" in refusal.content and "still available: slow" in refusal.content
    # The count lives in the checkpoint: a new graph on the same file still refuses.
    again = make_agent(ScriptedModel([tool_call("lookup", key="good"), answer("x")]), saver)
    ask(again, "once more")
    assert RUNS == ["bad0", "bad1", "bad2"]
    # Another thread is unaffected.
    other = make_agent(ScriptedModel([tool_call("lookup", key="good"), answer("x")]), saver)
    ask(other, "fresh", thread="t2")
    assert RUNS[-1] == "good"


def test_a_success_resets_the_failure_count(make_agent: Agent) -> None:
    steps: list[Any] = []
    for key in ("bad1", "bad2", "ok", "bad3", "bad4", "ok2"):
        steps += [tool_call("lookup", key=key), answer(key)]
    graph = make_agent(ScriptedModel(steps), breaker_threshold=3)
    for i in range(6):
        ask(graph, f"q{i}")
    assert RUNS == ["bad1", "bad2", "ok", "bad3", "bad4", "ok2"]


def test_token_budget_stops_the_turn_with_an_answer(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted(
        [
            with_usage(tool_call("lookup", key="a"), 60, 10),
            with_usage(tool_call("lookup", key="b"), 80, 10),
        ]
    )
    result = ask(make_agent(model, token_budget=100), "expensive")
    assert result["stop_reason"] == "token_budget"
    assert RUNS == ["a"]
    assert turn_counters(result["messages"])["usage"]["total_tokens"] == 160
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and "160 tokens" in final.content
    assert_every_call_answered_in_place(result["messages"])


def test_time_budget_abandons_a_running_tool_and_stops(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("slow", seconds=5)])
    started = time.monotonic()
    result = ask(make_agent(model, time_budget_s=0.5), "slow")
    assert time.monotonic() - started < 3
    assert result["stop_reason"] == "time_budget"
    interrupted = result["messages"][2]
    assert interrupted.status == "error" and "time budget ran out" in interrupted.content
    assert "time budget" in result["messages"][-1].content


def test_iteration_cap_holds_across_resume(
    scripted: Scripted, make_agent: Agent, tmp_path: Path
) -> None:
    db = tmp_path / "cap.db"
    config = {"configurable": {"thread_id": "t1"}}
    crashing = make_agent(
        ScriptedModel([tool_call("lookup", key="a"), RuntimeError("crash")]),
        sqlite_saver(db),
        max_iterations=2,
    )
    with pytest.raises(RuntimeError):
        ask(crashing, "go")
    model = scripted([tool_call("lookup", key="b")])
    resumed = make_agent(model, sqlite_saver(db), max_iterations=2)
    result = resumed.invoke(None, config)
    assert result["stop_reason"] == "max_iterations"  # 1 before the crash + 1 after = the cap
    assert RUNS == ["a"]


def test_new_question_after_a_dead_run_repairs_the_dangling_call(
    make_agent: Agent, tmp_path: Path
) -> None:
    db = tmp_path / "dead.db"
    config = {"configurable": {"thread_id": "t1"}}
    graph = make_agent(ScriptedModel([tool_call("lookup", key="a")]), sqlite_saver(db))
    graph.invoke({"messages": [("user", "first")]}, config, interrupt_before=["execute_tool"])
    model = ScriptedModel([answer("fresh answer")])
    result = ask(make_agent(model, sqlite_saver(db)), "second")
    messages = result["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "AIMessage",
    ]  # fmt: skip
    assert messages[2].status == "error" and "interrupted" in messages[2].content
    assert_every_call_answered_in_place(model.calls[0])
    assert RUNS == []
    stored = make_agent(ScriptedModel([]), sqlite_saver(db)).get_state(config).values["messages"]
    assert [m.id for m in stored] == [m.id for m in messages]


def test_merge_places_a_late_result_right_after_its_call() -> None:
    call = AIMessage("", id="ai", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}])
    history = [HumanMessage("q", id="q"), call, HumanMessage("next", id="n")]
    late = ToolMessage("late", tool_call_id="c1", id="t")
    assert [m.id for m in merge_messages(history, [late])] == ["q", "ai", "t", "n"]


def test_json_logs_carry_ids_and_no_secret(
    make_agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-value-123")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("ferry")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        model = ScriptedModel([tool_call("lookup", key="tvly-secret-value-123"), answer("ok")])
        ask(make_agent(model), "leak?")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)  # left at INFO, later tests' caplog would see every info line
    lines = [json.loads(JsonFormatter().format(r)) for r in records]
    events = {line.get("event") for line in lines}
    assert {"model_call", "tool_start", "tool_end"} <= events
    tool_lines = [line for line in lines if line.get("event") == "tool_end"]
    assert tool_lines[0]["thread_id"] == "t1" and tool_lines[0]["tool_call_id"]
    assert all("duration_ms" in line for line in tool_lines)
    assert "tvly-secret-value-123" not in json.dumps(lines)


def test_redact_removes_keys_and_bearer_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abcdefghijklmnop")
    text = "key sk-abcdefghijklmnop and Authorization: Bearer abcdef123456789"
    assert redact(text) == "key [redacted] and Authorization: Bearer [redacted]"


def test_merge_replaces_by_id_and_applies_removals() -> None:
    from langchain_core.messages import RemoveMessage

    history = [HumanMessage("q", id="q"), AIMessage("draft", id="a")]
    assert [m.content for m in merge_messages(history, [AIMessage("final", id="a")])] == [
        "q",
        "final",
    ]
    assert [m.id for m in merge_messages(history, [RemoveMessage(id="a")])] == ["q"]
    assert [m.content for m in history] == ["q", "draft"]  # the input is never changed


def test_merge_gives_the_same_ids_on_every_replay() -> None:
    first = merge_messages([], [("user", "hello")])
    again = merge_messages([], [("user", "hello")])
    assert first[0].id == again[0].id
    assert merge_messages(first, [("user", "hello")])[1].id != first[0].id


def test_an_abandoned_step_is_not_replayed_into_the_history(
    make_agent: Agent, tmp_path: Path
) -> None:
    """New input drops an unfinished step's saved results; a cold read must drop them too."""
    from langgraph.graph.state import CompiledStateGraph

    @tool
    def crash(seconds: float) -> str:
        """Wait, then take the process down.

        Args:
            seconds: how long to wait first.
        """
        time.sleep(seconds)
        raise SystemExit(3)

    db = tmp_path / "abandon.db"
    config: Any = {"configurable": {"thread_id": "t1"}}

    def graph(model: ScriptedModel) -> Any:
        return make_agent(model, sqlite_saver(db), tools=[lookup, crash])

    dying = graph(
        ScriptedModel([parallel(tool_call("lookup", key="a"), tool_call("crash", seconds=0.3))])
    )
    with pytest.raises(SystemExit):
        ask(dying, "go")
    # Plain LangGraph input, without Ferry's keeping of finished results: the step is abandoned.
    fresh = graph(ScriptedModel([answer("next answer")]))
    list(CompiledStateGraph.stream(fresh, {"messages": [("user", "next")]}, config))
    cold = graph(ScriptedModel([])).get_state(config).values["messages"]
    answered = [m.tool_call_id for m in cold if isinstance(m, ToolMessage)]
    assert len(answered) == len(set(answered)) == 2
    assert_every_call_answered_in_place(cold)
    assert cold[-1].content == "next answer"

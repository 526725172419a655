"""Approval before chosen tools: pause, decide, and no call run twice or lost."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph import build_graph
from graph.cli.agent import ask_decisions
from graph.settings import Settings
from tests.support.cli_helpers import Ferry
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call

RUNS: list[str] = []
CONFIG: Any = {"configurable": {"thread_id": "t1"}}


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    RUNS.append(f"delete {path}")
    return f"deleted {path}"


@tool
def peek(path: str) -> str:
    """Look at a file.

    Args:
        path: the file.
    """
    RUNS.append(f"peek {path}")
    return f"contents of {path}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


def make(model: ScriptedModel) -> Any:
    return build_graph(
        model=model,
        tools=[delete_file, peek],
        checkpointer=InMemorySaver(),
        settings=Settings(approve_tools="delete_file"),
    )


def test_run_pauses_before_an_approval_tool_and_runs_nothing() -> None:
    graph = make(
        ScriptedModel([parallel(tool_call("delete_file", path="a"), tool_call("peek", path="b"))])
    )
    result = graph.invoke({"messages": [("user", "go")]}, CONFIG)
    pause = result["__interrupt__"][0].value
    assert pause["pending_approvals"] == [
        {"id": "call_1", "name": "delete_file", "args": {"path": "a"}}
    ]
    assert RUNS == []  # not even the call that needs no approval runs before the decision
    assert graph.get_state(CONFIG).next == ("check",)


def test_approve_runs_each_call_exactly_once() -> None:
    model = ScriptedModel(
        [parallel(tool_call("delete_file", path="a"), tool_call("peek", path="b")), answer("ok")]
    )
    graph = make(model)
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(Command(resume={"call_1": {"action": "approve"}}), CONFIG)
    assert sorted(RUNS) == ["delete a", "peek b"]
    assert result["stop_reason"] == "answered"
    model.assert_complete()


def test_reject_answers_the_call_with_the_reason() -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("fine")])
    graph = make(model)
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(Command(resume={"action": "reject", "reason": "too risky"}), CONFIG)
    assert RUNS == []
    rejection = result["messages"][2]
    assert isinstance(rejection, ToolMessage) and rejection.status == "error"
    assert "declined" in rejection.content and "too risky" in rejection.content
    assert isinstance(model.calls[1][-1], ToolMessage)


def test_edit_runs_the_new_arguments_and_the_history_shows_them() -> None:
    model = ScriptedModel([tool_call("delete_file", path="important"), answer("done")])
    graph = make(model)
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(
        Command(resume={"call_1": {"action": "edit", "args": {"path": "tmp"}}}), CONFIG
    )
    assert RUNS == ["delete tmp"]
    calls = [m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(calls) == 1 and calls[0].tool_calls[0]["args"] == {"path": "tmp"}


def test_mixed_decisions_on_parallel_calls() -> None:
    model = ScriptedModel(
        [
            parallel(tool_call("delete_file", path="x"), tool_call("delete_file", path="y")),
            answer("ok"),
        ]
    )
    graph = make(model)
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    decisions = {"call_1": {"action": "approve"}, "call_2": {"action": "reject", "reason": "no"}}
    result = graph.invoke(Command(resume=decisions), CONFIG)
    assert RUNS == ["delete x"]
    results = {m.tool_call_id: m.status for m in result["messages"] if isinstance(m, ToolMessage)}
    assert results == {"call_1": "success", "call_2": "error"}


def test_terminal_prompt_collects_each_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["x", "e", "not json", "e", '{"path": "b"}', "r", "nope"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    pending = [
        {"id": "1", "name": "delete_file", "args": {"path": "a"}},
        {"id": "2", "name": "peek", "args": {}},
    ]
    assert ask_decisions(pending) == {
        "1": {"action": "edit", "args": {"path": "b"}},
        "2": {"action": "reject", "reason": "nope"},
    }


def test_cli_json_reports_awaiting_approval_then_resume_approves(
    cli: Ferry, tmp_path: Path
) -> None:
    env = {**os.environ, "FERRY_APPROVE_TOOLS": "calculator"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=env, cwd=tmp_path)

    asked = run("ask", "What is 150 * 3?", "--json")
    report = json.loads(asked.stdout)
    assert asked.returncode == 0
    assert report["stop_reason"] == "awaiting_approval" and report["answer"] == ""
    assert [p["name"] for p in report["pending_approvals"]] == ["calculator"]
    assert report["pending_approvals"][0]["args"] == {"expression": "150 * 3"}
    thread = report["thread_id"]
    again = json.loads(run("resume", "--thread", thread, "--json").stdout)
    assert again["stop_reason"] == "awaiting_approval"  # no decision: still paused, nothing lost
    done = json.loads(run("resume", "--thread", thread, "--approve", "--json").stdout)
    assert done["stop_reason"] == "answered" and "450" in done["answer"]
    assert [c["name"] for c in done["tool_calls"]] == ["calculator"]
    assert run("resume", "--thread", thread, "--approve").returncode == 1  # nothing pending

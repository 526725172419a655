"""Approval before chosen tools: pause, decide, and no call run twice or lost.

Requests and decisions are built with LangChain's own `HumanInTheLoopMiddleware` types.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    ApproveDecision,
    EditDecision,
    HITLRequest,
    HITLResponse,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
)
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import TypeAdapter

from graph.cli.agent import ask_decisions
from graph.core.settings import ConfigError, get_settings
from graph.policy import approval
from tests.support.cli_helpers import Ferry
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [delete_file, peek]


ALL: list[Any] = ["approve", "edit", "reject"]  # the default: `respond` only when listed


def asked(*calls: tuple[str, str, dict[str, Any]], allowed: list[Any] = ALL) -> HITLRequest:
    """The request the middleware would raise for (id, name, args) calls, plus each call id."""
    return HITLRequest(
        action_requests=[
            {
                **ActionRequest(
                    name=name,
                    args=args,
                    description=f"Tool execution requires approval\n\nTool: {name}\n"
                    f"Args: {json.dumps(args)}\nTool call id: {call_id}",
                ),
                "tool_call_id": call_id,
            }
            for call_id, name, args in calls
        ],
        review_configs=[
            ReviewConfig(action_name=name, allowed_decisions=allowed) for _, name, _ in calls
        ],
    )


def resume(*decisions: Any) -> Command[Any]:
    return Command(resume=HITLResponse(decisions=list(decisions)))


def test_run_pauses_with_the_middlewares_request_and_runs_nothing(make_agent: Agent) -> None:
    model = ScriptedModel(
        [parallel(tool_call("delete_file", path="a"), tool_call("peek", path="b"))]
    )
    graph = make_agent(model, approve_tools="delete_file")
    result = graph.invoke({"messages": [("user", "go")]}, CONFIG)
    pause = result["__interrupt__"][0].value
    assert pause == asked(("call_1", "delete_file", {"path": "a"}))
    assert TypeAdapter(HITLRequest).validate_python(pause)  # its own type accepts it
    assert RUNS == []  # not even the call that needs no approval runs before the decision
    assert graph.get_state(CONFIG).next == ("check",)


def test_approve_runs_each_call_exactly_once(scripted: Scripted, make_agent: Agent) -> None:
    model = scripted(
        [parallel(tool_call("delete_file", path="a"), tool_call("peek", path="b")), answer("ok")]
    )
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(resume(ApproveDecision(type="approve")), CONFIG)
    assert sorted(RUNS) == ["delete a", "peek b"]
    assert result["stop_reason"] == "answered"


def test_reject_answers_the_call_with_the_message(make_agent: Agent) -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("fine")])
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(resume(RejectDecision(type="reject", message="too risky")), CONFIG)
    assert RUNS == []
    rejection = result["messages"][2]
    assert isinstance(rejection, ToolMessage) and rejection.status == "error"
    assert "declined" in rejection.content and "too risky" in rejection.content
    assert isinstance(model.calls[1][-1], ToolMessage)


def test_respond_gives_the_message_as_the_result_without_running_the_tool(
    make_agent: Agent,
) -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("noted")])
    graph = make_agent(model, approve_tools="delete_file:approve|respond")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    result = graph.invoke(resume(RespondDecision(type="respond", message="already gone")), CONFIG)
    assert RUNS == []
    reply = result["messages"][2]
    assert isinstance(reply, ToolMessage) and reply.tool_call_id == "call_1"
    assert (reply.status, reply.content, reply.name) == ("success", "already gone", "delete_file")
    assert "\nalready gone\n" in model.calls[1][-1].content  # the model sees it, fenced


def test_edit_runs_the_new_arguments_and_the_history_shows_them(make_agent: Agent) -> None:
    model = ScriptedModel([tool_call("delete_file", path="important"), answer("done")])
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    edited = {"name": "delete_file", "args": {"path": "tmp"}}
    result = graph.invoke(resume(EditDecision(type="edit", edited_action=edited)), CONFIG)
    assert RUNS == ["delete tmp"]
    calls = [m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(calls) == 1 and calls[0].tool_calls[0]["args"] == {"path": "tmp"}


def test_mixed_decisions_on_parallel_calls_match_by_position(make_agent: Agent) -> None:
    model = ScriptedModel(
        [
            parallel(tool_call("delete_file", path="x"), tool_call("delete_file", path="y")),
            answer("ok"),
        ]
    )
    graph = make_agent(model, approve_tools="delete_file")
    pause = graph.invoke({"messages": [("user", "go")]}, CONFIG)["__interrupt__"][0].value
    assert pause == asked(
        ("call_1", "delete_file", {"path": "x"}), ("call_2", "delete_file", {"path": "y"})
    )
    no = RejectDecision(type="reject", message="no")
    result = graph.invoke(resume(ApproveDecision(type="approve"), no), CONFIG)
    assert RUNS == ["delete x"]
    results = {m.tool_call_id: m.status for m in result["messages"] if isinstance(m, ToolMessage)}
    assert results == {"call_1": "success", "call_2": "error"}


@pytest.mark.parametrize("approved", ["call_1", "call_2"])
def test_results_are_stored_in_the_calls_order_whichever_was_decided_first(
    make_agent: Agent, approved: str
) -> None:
    model = ScriptedModel(
        [
            parallel(tool_call("delete_file", path="x"), tool_call("delete_file", path="y")),
            answer("ok"),
        ]
    )
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    yes, no = ApproveDecision(type="approve"), RejectDecision(type="reject", message="no")
    decisions = [yes, no] if approved == "call_1" else [no, yes]
    result = graph.invoke(resume(*decisions), CONFIG)
    assert RUNS == ["delete x" if approved == "call_1" else "delete y"]
    stored = [
        (m.type, m.tool_call_id, m.status) if isinstance(m, ToolMessage) else (m.type, m.content)
        for m in graph.get_state(CONFIG).values["messages"]
    ]
    status = {"call_1": "error", "call_2": "error", approved: "success"}
    assert stored == [
        ("human", "go"),
        ("ai", ""),
        ("tool", "call_1", status["call_1"]),
        ("tool", "call_2", status["call_2"]),
        ("ai", "ok"),
    ]
    assert [m.id for m in result["messages"]] == [
        m.id for m in graph.get_state(CONFIG).values["messages"]
    ]
    assert [m.type for m in model.calls[1][-2:]] == ["tool", "tool"]


def refused_then(graph: Any, bad: Any, allowed: list[Any], error: str) -> None:
    """`bad` is refused: nothing runs, the same calls pause again, the error heading them."""
    pause = graph.invoke(Command(resume=bad), CONFIG)["__interrupt__"][0].value
    assert RUNS == []
    expected = asked(("call_1", "delete_file", {"path": "a"}), allowed=allowed)
    [request] = pause["action_requests"]
    assert request["description"].startswith(f"Refused: tool call call_1 (delete_file): {error}")
    assert request["description"].endswith(expected["action_requests"][0]["description"])
    assert pause["review_configs"] == expected["review_configs"]
    assert graph.get_state(CONFIG).next == ("check",)


def test_a_decision_the_config_does_not_allow_is_refused_and_the_call_stays_pending(
    scripted: Scripted, make_agent: Agent
) -> None:
    model = scripted([tool_call("delete_file", path="a"), answer("ok")])
    graph = make_agent(model, approve_tools="delete_file:approve|reject")
    pause = graph.invoke({"messages": [("user", "go")]}, CONFIG)["__interrupt__"][0].value
    allowed: list[Any] = ["approve", "reject"]
    assert pause["review_configs"] == [
        ReviewConfig(action_name="delete_file", allowed_decisions=allowed)
    ]
    edit = EditDecision(type="edit", edited_action={"name": "delete_file", "args": {"path": "b"}})
    refused_then(
        graph,
        HITLResponse(decisions=[edit]),
        allowed,
        "'edit' is not allowed for delete_file, only approve|reject (FERRY_APPROVE_TOOLS)",
    )
    respond = RespondDecision(type="respond", message="x")
    refused_then(graph, HITLResponse(decisions=[respond]), allowed, "'respond' is not allowed")
    result = graph.invoke(resume(ApproveDecision(type="approve")), CONFIG)  # then decided
    assert RUNS == ["delete a"] and result["stop_reason"] == "answered"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"decisions": []}, "0 decisions for 1 tool calls"),
        ({"decisions": [{"type": "maybe"}]}, "tool call call_1 (delete_file): a decision is"),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "peek", "args": {}}}]},
            "tool call call_1 (delete_file): an edit may change the arguments, not the tool",
        ),
        ({"decisions": [{"type": "respond"}]}, "tool call call_1 (delete_file): a `respond`"),
        ("yes", "resume with {'decisions': [...]}"),
    ],
)
def test_a_malformed_resume_is_refused_and_the_call_stays_pending(
    make_agent: Agent, bad: Any, error: str
) -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("ok")])
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    pause = graph.invoke(Command(resume=bad), CONFIG)["__interrupt__"][0].value
    assert pause["action_requests"][0]["description"].startswith(f"Refused: {error}")
    assert RUNS == []
    graph.invoke(resume(ApproveDecision(type="approve")), CONFIG)
    assert RUNS == ["delete a"]


@pytest.mark.parametrize(
    ("decision", "runs", "result"),
    [
        ({"call_1": {"action": "approve"}}, ["delete a"], "deleted a"),
        ({"action": "approve"}, ["delete a"], "deleted a"),
        ({"call_1": {"action": "edit", "args": {"path": "b"}}}, ["delete b"], "deleted b"),
        ({"action": "reject", "reason": "later"}, [], "The user declined this call (later)."),
        ({"other": {"action": "approve"}}, [], "The user declined this call (no decision)."),
    ],
)
def test_a_thread_paused_in_the_older_format_resumes_with_the_older_decisions(
    make_agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    decision: Any,
    runs: list[str],
    result: str,
) -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("ok")])
    graph = make_agent(model, approve_tools="delete_file")
    with monkeypatch.context() as older:
        older.setattr(approval, "request", older_request)
        pause = graph.invoke({"messages": [("user", "go")]}, CONFIG)["__interrupt__"][0].value
    assert pause == {
        "pending_approvals": [{"id": "call_1", "name": "delete_file", "args": {"path": "a"}}]
    }
    done = graph.invoke(Command(resume=decision), CONFIG)
    assert RUNS == runs
    assert str(done["messages"][2].content).startswith(result)


def older_request(calls: Any, reasons: Any, allowed: Any, error: Any = None) -> Any:
    """The interrupt value Ferry raised before it used LangChain's format."""
    return {
        "pending_approvals": [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in calls]
    }


def test_terminal_prompt_collects_each_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["x", "e", "not json", "e", '{"path": "b"}', "s", "r", "nope"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    pending = [
        {"id": "1", "name": "delete_file", "args": {"path": "a"}},
        {"id": "2", "name": "peek", "args": {}, "allowed_decisions": ["approve", "reject"]},
    ]
    edited = {"name": "delete_file", "args": {"path": "b"}}
    assert ask_decisions(pending) == HITLResponse(
        decisions=[
            EditDecision(type="edit", edited_action=edited),
            RejectDecision(type="reject", message="nope"),  # "s" (respond) is not offered
        ]
    )


def test_approve_tools_names_the_decisions_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_APPROVE_TOOLS", "read_file, web_search:approve|reject")
    assert get_settings().approval_decisions == {
        "read_file": ("approve", "edit", "reject"),
        "web_search": ("approve", "reject"),
    }
    monkeypatch.setenv("FERRY_APPROVE_TOOLS", "web_search:approve|maybe")
    with pytest.raises(ConfigError, match="FERRY_APPROVE_TOOLS: 'web_search:approve|maybe'"):
        get_settings()


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


def test_cli_refuses_a_decision_the_config_does_not_allow_and_resumes_older_pauses(
    cli: Ferry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "FERRY_APPROVE_TOOLS": "calculator:reject"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=env, cwd=tmp_path)

    thread = json.loads(run("ask", "What is 150 * 3?", "--json").stdout)["thread_id"]
    refused = run("resume", "--thread", thread, "--approve")
    assert refused.returncode == 1
    assert refused.stderr.endswith(
        "does not allow approve: FERRY_APPROVE_TOOLS allows reject for calculator\n"
    )
    done = json.loads(run("resume", "--thread", thread, "--reject", "no", "--json").stdout)
    assert done["stop_reason"] == "answered"
    assert [c["status"] for c in done["tool_calls"]] == ["error"]  # rejected, not run

    env["FERRY_APPROVE_TOOLS"] = "calculator"
    with monkeypatch.context() as older:
        older.setattr(approval, "request", older_request)
        paused = json.loads(run("ask", "What is 2 * 3?", "--json").stdout)
    [pending] = paused["pending_approvals"]
    assert pending == {"id": pending["id"], "name": "calculator", "args": {"expression": "2 * 3"}}
    done = json.loads(run("resume", "--thread", paused["thread_id"], "--approve", "--json").stdout)
    assert done["stop_reason"] == "answered" and "6" in done["answer"]

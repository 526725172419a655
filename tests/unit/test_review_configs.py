"""`review_configs` offer approve / edit / reject by default; `respond` only when a tool opts in.

agent-chat-ui has no button for `respond`, so a tool listed bare in `FERRY_APPROVE_TOOLS` does
not offer it, and a client that sends it anyway is refused like any other disallowed decision.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import (
    ApproveDecision,
    HITLResponse,
    RespondDecision,
    ReviewConfig,
)
from langchain_core.tools import BaseTool
from langgraph.types import Command

from graph.core.hitl import DEFAULT_DECISIONS, awaiting
from graph.core.settings import approval_decisions
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.fixtures import Agent
from tests.support.scripted import ScriptedModel, answer, parallel, tool_call

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
DEFAULT: list[Any] = ["approve", "edit", "reject"]


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [delete_file, peek]


def test_the_default_is_approve_edit_reject() -> None:
    assert list(DEFAULT_DECISIONS) == DEFAULT
    assert approval_decisions("read_file, web_search:approve|edit|reject|respond") == {
        "read_file": ("approve", "edit", "reject"),
        "web_search": ("approve", "edit", "reject", "respond"),
    }
    legacy = {"pending_approvals": [{"id": "c", "name": "peek", "args": {}}]}
    assert awaiting(legacy)[0]["allowed_decisions"] == DEFAULT


def test_a_bare_tool_offers_no_respond_and_an_opted_in_one_does(make_agent: Agent) -> None:
    model = ScriptedModel(
        [parallel(tool_call("delete_file", path="a"), tool_call("peek", path="b"))]
    )
    graph = make_agent(model, approve_tools="delete_file,peek:approve|edit|reject|respond")
    pause = graph.invoke({"messages": [("user", "go")]}, CONFIG)["__interrupt__"][0].value
    assert pause["review_configs"] == [
        ReviewConfig(action_name="delete_file", allowed_decisions=DEFAULT),
        ReviewConfig(action_name="peek", allowed_decisions=[*DEFAULT, "respond"]),
    ]
    assert [c["allowed_decisions"] for c in awaiting(pause)] == [DEFAULT, [*DEFAULT, "respond"]]


def test_respond_to_a_tool_that_does_not_allow_it_is_refused(make_agent: Agent) -> None:
    model = ScriptedModel([tool_call("delete_file", path="a"), answer("ok")])
    graph = make_agent(model, approve_tools="delete_file")
    graph.invoke({"messages": [("user", "go")]}, CONFIG)
    respond = RespondDecision(type="respond", message="already gone")
    again = graph.invoke(Command(resume=HITLResponse(decisions=[respond])), CONFIG)
    [pause] = [i.value for i in again["__interrupt__"]]
    assert pause["action_requests"][0]["description"].startswith(
        "Refused: tool call call_1 (delete_file): 'respond' is not allowed for delete_file, "
        "only approve|edit|reject (FERRY_APPROVE_TOOLS). Nothing ran; decide again."
    )
    assert pause["review_configs"] == [
        ReviewConfig(action_name="delete_file", allowed_decisions=DEFAULT)
    ]
    assert RUNS == []
    result = graph.invoke(
        Command(resume=HITLResponse(decisions=[ApproveDecision(type="approve")])), CONFIG
    )
    assert RUNS == ["delete a"] and result["stop_reason"] == "answered"

"""An unfinished turn is read from the stored messages alone."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graph.lifecycle import unfinished_turn

CALL = {"name": "calculator", "args": {"expression": "1+1"}, "id": "c1"}
ASKED = HumanMessage("1+1?", id="h")
CALLED = AIMessage("", tool_calls=[CALL], id="a1")
RESULT = ToolMessage("2", tool_call_id="c1", id="t")
ANSWER = AIMessage("2", id="a2")


@pytest.mark.parametrize(
    ("messages", "unfinished"),
    [
        ([], False),
        ([ASKED], True),
        ([ASKED, CALLED], True),
        ([ASKED, CALLED, RESULT], True),
        ([ASKED, CALLED, RESULT, ANSWER], False),
        ([ASKED, ANSWER, HumanMessage("and 2+2?", id="h2")], True),
    ],
    ids=["empty", "question only", "calls unanswered", "results unseen", "answered", "new turn"],
)
def test_unfinished_turn(messages: list[BaseMessage], unfinished: bool) -> None:
    assert unfinished_turn(messages) is unfinished


def test_an_answer_never_checked_is_sent_to_check() -> None:
    from langgraph.types import StateSnapshot

    from graph.lifecycle import continuation

    def snapshot(stop_reason: str | None) -> StateSnapshot:
        values = {"messages": [ASKED, ANSWER], "stop_reason": stop_reason}
        return StateSnapshot(values, (), {}, {}, None, None, (), ())

    unchecked = continuation(snapshot(None))
    assert unchecked is not None and unchecked.goto == "check"
    assert continuation(snapshot("answered")) is None

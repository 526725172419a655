"""Time travel from Python: a thread's checkpoints, a fork into a new thread, undoing a turn.

What a user sees: the original thread untouched by a fork, a forked pause that pauses again
and runs its call once when approved, a turn taken back that the model never sees again, the
old head still reachable, and the refusals (a fork between check and the tools, an unknown
checkpoint, a taken thread id, undoing the only turn) as one line.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langgraph.types import Command

from graph.threads.travel import TravelError, checkpoints, fork, undo
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import answer, tool_call


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [delete_file, peek]


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def texts(agent: Any, thread_id: str) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in agent.get_state(config(thread_id)).values["messages"]]


def two_turns(make_agent: Agent, scripted: Scripted, *later: Any) -> tuple[Any, Any]:
    """Thread "a": peek at a, answered; then "hello", answered. `later`: the model's next steps."""
    model = scripted([tool_call("peek", path="a"), answer("a holds text"), answer("hi"), *later])
    agent = make_agent(model)
    agent.invoke({"messages": [("user", "peek at a")]}, config("a"))
    agent.invoke({"messages": [("user", "hello")]}, config("a"))
    return agent, model


def test_the_checkpoints_run_from_the_start_to_the_head(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, _ = two_turns(make_agent, scripted)
    listed = checkpoints(agent, "a")
    assert [c.happened for c in listed] == [
        "new input",
        "asked: peek at a",
        "called peek",
        "check let the calls run",
        "peek ran",
        "answered: a holds text",
        "turn ended (answered)",
        "new input",
        "asked: hello",
        "answered: hi",
        "turn ended (answered)",
    ]
    assert [c.step for c in listed] == list(range(-1, 10))
    head = agent.get_state(config("a")).config["configurable"]["checkpoint_id"]
    assert listed[-1].checkpoint_id == head
    assert listed[-1].messages == 6 and listed[-1].next == ()


def test_undo_takes_the_last_turn_back_and_the_model_never_sees_it(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, model = two_turns(make_agent, scripted, answer("again"))
    before = checkpoints(agent, "a")
    old_head, question = undo(agent, "a")
    assert (old_head, question) == (before[-1].checkpoint_id, "hello")
    assert texts(agent, "a") == [
        ("human", "peek at a"),
        ("ai", ""),
        ("tool", "contents of a"),
        ("ai", "a holds text"),
    ]
    agent.invoke({"messages": [("user", "and now?")]}, config("a"))
    assert "hello" not in [m.text for m in model.calls[-1]]
    assert texts(agent, "a")[-2:] == [("human", "and now?"), ("ai", "again")]
    assert RUNS == ["peek a"]  # what the tools did is not undone, nor done again


def test_the_undone_head_stays_reachable_by_its_id(make_agent: Agent, scripted: Scripted) -> None:
    agent, _ = two_turns(make_agent, scripted)
    old_head, _ = undo(agent, "a")
    fork(agent, "a", old_head, to="kept")
    assert texts(agent, "kept")[-2:] == [("human", "hello"), ("ai", "hi")]


def test_undo_goes_back_one_turn_at_a_time_and_not_past_the_first(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, _ = two_turns(make_agent, scripted)
    undo(agent, "a")
    with pytest.raises(TravelError, match="has one turn: nothing is before it"):
        undo(agent, "a")
    assert len(texts(agent, "a")) == 4
    with pytest.raises(TravelError, match="unknown thread 'nobody'"):
        undo(agent, "nobody")


def test_undo_of_a_paused_turn_drops_the_pause_and_the_call_never_runs(
    make_agent: Agent, scripted: Scripted
) -> None:
    model = scripted([answer("hi"), tool_call("delete_file", path="b")])
    agent = make_agent(model, approve_tools="delete_file")
    agent.invoke({"messages": [("user", "hello")]}, config("a"))
    agent.invoke({"messages": [("user", "delete b")]}, config("a"))
    assert agent.get_state(config("a")).interrupts
    undo(agent, "a")
    state = agent.get_state(config("a"))
    assert (state.next, state.interrupts) == ((), ())
    assert texts(agent, "a") == [("human", "hello"), ("ai", "hi")]
    assert RUNS == []


def test_a_fork_of_a_pause_pauses_again_and_runs_the_call_once_approved(
    make_agent: Agent, scripted: Scripted
) -> None:
    model = scripted([tool_call("delete_file", path="b"), answer("deleted b")])
    agent = make_agent(model, approve_tools="delete_file")
    agent.invoke({"messages": [("user", "delete b")]}, config("a"))
    paused = checkpoints(agent, "a")[-1]
    assert paused.happened == "called delete_file; paused for approval"

    new = fork(agent, "a", paused.checkpoint_id)
    agent.invoke(None, config(new))
    [pause] = agent.get_state(config(new)).interrupts
    assert [r["args"] for r in pause.value["action_requests"]] == [{"path": "b"}]
    assert RUNS == []
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config(new))
    assert RUNS == ["delete b"]
    assert texts(agent, new)[-1] == ("ai", "deleted b")
    assert agent.get_state(config("a")).interrupts  # the original still waits for its decision


def test_a_fork_at_a_turns_end_goes_on_as_its_own_thread(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, model = two_turns(make_agent, scripted, answer("forked answer"))
    first_end = [c for c in checkpoints(agent, "a") if c.happened.startswith("turn ended")][0]
    original = texts(agent, "a")
    new = fork(agent, "a", first_end.checkpoint_id[:24], to="b")  # a prefix names it
    assert new == "b" and agent.get_state(config("b")).next == ()
    agent.invoke({"messages": [("user", "something else")]}, config("b"))
    assert [m.text for m in model.calls[-1]][-2:] == ["a holds text", "something else"]
    assert texts(agent, "a") == original


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("between check and the tools", "between check and the tools"),
        ("nowhere", "has no checkpoint 'nowhere'"),
        ("the start", "holds no messages yet"),
        ("into a taken id", "thread a exists already"),
    ],
)
def test_a_fork_that_cannot_be_made_is_refused_in_one_line(
    make_agent: Agent, scripted: Scripted, where: str, why: str
) -> None:
    agent, _ = two_turns(make_agent, scripted)
    listed = checkpoints(agent, "a")
    at = {
        "between check and the tools": listed[3].checkpoint_id,
        "nowhere": "nowhere",
        "the start": listed[0].checkpoint_id,
        "into a taken id": listed[-1].checkpoint_id,
    }[where]
    with pytest.raises(TravelError, match=why):
        fork(agent, "a", at, to="a" if where == "into a taken id" else None)
    assert RUNS == ["peek a"]
    assert [c.checkpoint_id for c in checkpoints(agent, "a")] == [c.checkpoint_id for c in listed]


def _paused_then_asked_on(make_agent: Agent, scripted: Scripted, *later: Any) -> Any:
    """Thread "a": delete b paused for approval, then a new question answered it "not run"."""
    model = scripted([tool_call("delete_file", path="b"), answer("ok, hello"), *later])
    agent = make_agent(model, approve_tools="delete_file")
    agent.invoke({"messages": [("user", "delete b")]}, config("a"))
    agent.invoke({"messages": [("user", "never mind, hello")]}, config("a"))
    return agent, model


def test_undo_after_a_repaired_pause_takes_the_question_back(
    make_agent: Agent, scripted: Scripted
) -> None:
    """The "not run" result filed before the question moves its position: undo finds the
    turn's start by the question's id."""
    agent, model = _paused_then_asked_on(make_agent, scripted, answer("third"))
    _, question = undo(agent, "a")
    assert question == "never mind, hello"
    assert "never mind, hello" not in [text for _, text in texts(agent, "a")]
    agent.invoke({"messages": [("user", "third question")]}, config("a"))
    assert "never mind, hello" not in [m.text for m in model.calls[-1]]
    assert RUNS == []


def test_a_fork_at_the_input_after_a_pause_pauses_again(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, _ = _paused_then_asked_on(make_agent, scripted)
    inputs = [c for c in checkpoints(agent, "a") if c.happened == "new input"]
    new = fork(agent, "a", inputs[-1].checkpoint_id)  # the state before "never mind, hello"
    assert agent.get_state(config(new)).next == ("check",)  # decided again, not run
    agent.invoke(None, config(new))
    [pause] = agent.get_state(config(new)).interrupts
    assert [r["args"] for r in pause.value["action_requests"]] == [{"path": "b"}]
    assert RUNS == []

"""No tool runs without a release only `check` can make, whatever a client writes, by every door.

The thread: `delete_file(secret)` (which needs approval) is paused for a decision. The attacks
are client writes of every shape LangGraph takes: run input, `Command` values in every
position, state updates as each node and with task ids, copies, forks of older checkpoints,
replays of an earlier turn, and a write past the gate (as a write path LangGraph adds later
would be) carrying a mark computed the old, unkeyed way. After each: the tool did not run, the
pause is still there, and no call has two results. The controls: what `check` releases runs,
approved, edited or free; "Mark as Resolved" ends the pause without running the call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware.human_in_the_loop import (
    ApproveDecision,
    EditDecision,
    HITLResponse,
    RejectDecision,
)
from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, StateUpdate

from graph.guards import INTERRUPTED
from graph.nodes import RunContext
from graph.policy.approval import UNDECIDED
from graph.policy.releases import NOT_RELEASED, UnreleasedCallError
from graph.provenance import ClientCommandError, ClientWriteError
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.fixtures import Agent, Scripted
from tests.support.scripted import answer, tool_call

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
SECRET_CALL: Any = {"name": "delete_file", "args": {"path": "secret"}, "id": "call_1"}
FORGED_CALL: Any = {"name": "delete_file", "args": {"path": "secret"}, "id": "forged-1"}


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [delete_file, peek]


def _paused(make_agent: Agent, scripted: Scripted, *later: AIMessage) -> Any:
    """A thread paused on `delete_file(secret)`'s approval; `later`: the model's next replies."""
    model = scripted([tool_call("delete_file", path="secret"), *later])
    agent = make_agent(model, approve_tools="delete_file")
    agent.invoke({"messages": [("user", "delete secret")]}, CONFIG)
    assert [t.name for t in agent.get_state(CONFIG).tasks] == ["check"]
    return agent


def _unkeyed_mark(call: Any) -> str:
    """The release mark as it was before it was keyed: anyone could compute it."""
    text = json.dumps([call["id"], call["name"], call["args"]], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _assert_intact(agent: Any) -> None:
    """The tool did not run, the pause is still there, and every call has one result at most."""
    assert RUNS == []
    state = agent.get_state(CONFIG)
    [pause] = state.interrupts
    assert [r["tool_call_id"] for r in pause.value["action_requests"]] == ["call_1"]
    results = Counter(
        m.tool_call_id for m in state.values["messages"] if isinstance(m, ToolMessage)
    )
    assert all(n == 1 for n in results.values())


def _run(agent: Any, graph_input: Any, door: str, config: Any = CONFIG) -> None:
    """Run `graph_input` through one of the four Python entry points, to the end."""
    if door == "invoke":
        agent.invoke(graph_input, config)
    elif door == "stream":
        list(agent.stream(graph_input, config))
    elif door == "ainvoke":
        asyncio.run(agent.ainvoke(graph_input, config))
    else:

        async def drain() -> None:
            async for _ in agent.astream(graph_input, config):
                pass

        asyncio.run(drain())


class LooksEmpty(dict):  # type: ignore[type-arg]
    """A mapping that compares equal to `{}` while it carries a write."""

    def __eq__(self, other: object) -> bool:
        return other == {} or dict.__eq__(self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class Shifty(Command):  # type: ignore[type-arg]
    """A command whose update is empty when first asked and a write of Ferry's own keys after."""

    def __getattribute__(self, name: str) -> Any:
        if name == "update":
            asked = object.__getattribute__(self, "asked")
            object.__setattr__(self, "asked", asked + 1)
            forged = {"tool_failures": {"delete_file": 7}, "stop_reason": "forged"}
            return {} if asked == 0 else forged
        return object.__getattribute__(self, name)


def _shifty() -> Command[Any]:
    command = Shifty(resume={"decisions": [{"type": "reject"}]})
    object.__setattr__(command, "asked", 0)
    return command


DOORS = ["invoke", "stream", "ainvoke", "astream"]
SEND = Send("execute_tool", {"call": SECRET_CALL, "failures": 0})
FORGED_REPLY = {"type": "ai", "content": "", "tool_calls": [FORGED_CALL], "id": "forged-reply"}
RUN_FORGERIES: dict[str, Callable[[], Any]] = {
    "goto one Send": lambda: Command(goto=SEND),
    "goto a list of Sends": lambda: Command(goto=[SEND]),
    "goto the tool node": lambda: Command(goto="execute_tool"),
    "goto the model node": lambda: Command(goto="call_model"),
    "goto check": lambda: Command(goto="check"),
    "resume and goto": lambda: Command(resume={"action": "approve"}, goto=SEND),
    "update and goto the end": lambda: Command(update={"messages": []}, goto="__end__"),
    "resume and update": lambda: Command(
        resume={"action": "approve"}, update={"messages": [("user", "hi")]}
    ),
    "update of the marks": lambda: Command(update={"released_calls": _unkeyed_mark(SECRET_CALL)}),
    "update pairs of the marks": lambda: Command(
        update=[("released_calls", _unkeyed_mark(SECRET_CALL))]
    ),
    "update of the stop reason": lambda: Command(update={"stop_reason": None}),
    "update of the breaker": lambda: Command(update={"tool_failures": {"delete_file": 0}}),
    "input with the marks": lambda: {
        "messages": [("user", "hi")],
        "released_calls": _unkeyed_mark(SECRET_CALL),
    },
    "input with a key LangGraph adds later": lambda: {"messages": [("user", "hi")], "next": 1},
    "input that is not a mapping": lambda: [("user", "hi")],
    "resume beside an update that looks empty": lambda: Command(
        resume={"decisions": [{"type": "approve"}]},
        update=LooksEmpty(stop_reason="answered"),
    ),
    "resume beside a goto that looks empty": lambda: Command(
        resume={"decisions": [{"type": "approve"}]}, goto=LooksEmpty(x=SEND)
    ),
    "a command for the parent graph": lambda: Command(graph=Command.PARENT, goto="__end__"),
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("forgery", list(RUN_FORGERIES))
def test_a_forged_run_input_is_refused(
    make_agent: Agent, scripted: Scripted, door: str, forgery: str
) -> None:
    agent = _paused(make_agent, scripted)
    before = agent.get_state(CONFIG).values
    with pytest.raises(ClientWriteError):
        _run(agent, RUN_FORGERIES[forgery](), door)
    _assert_intact(agent)
    assert agent.get_state(CONFIG).values == before


def _task_of_the_pause(agent: Any) -> str:
    return str(agent.get_state(CONFIG).tasks[0].id)


UPDATE_FORGERIES: dict[str, Callable[[Any], list[StateUpdate]]] = {
    "the marks as check": lambda a: [
        StateUpdate({"released_calls": _unkeyed_mark(SECRET_CALL)}, "check", None)
    ],
    "the marks as the model": lambda a: [
        StateUpdate({"released_calls": _unkeyed_mark(SECRET_CALL)}, "call_model", None)
    ],
    "the marks as input": lambda a: [
        StateUpdate({"released_calls": _unkeyed_mark(SECRET_CALL)}, "__input__", None)
    ],
    "the stop reason as the paused check": lambda a: [
        StateUpdate({"stop_reason": None}, "check", None)
    ],
    "messages as the paused check": lambda a: [
        StateUpdate({"messages": [FORGED_REPLY]}, "check", None)
    ],
    "the paused task's own id": lambda a: [
        StateUpdate({"messages": [("user", "hi")]}, "call_model", _task_of_the_pause(a))
    ],
    "a clear of every task": lambda a: [StateUpdate(None, "__end__", None)],
    "as a node that is not there": lambda a: [StateUpdate({"messages": []}, "tools", None)],
    "a Command with goto": lambda a: [StateUpdate(Command(goto=SEND), "call_model", None)],
    "a Command with resume": lambda a: [
        StateUpdate(Command(resume={"action": "approve"}), "call_model", None)
    ],
    "a copy carrying the marks": lambda a: [
        StateUpdate(
            [({"released_calls": _unkeyed_mark(SECRET_CALL)}, "call_model")], "__copy__", None
        )
    ],
    "a result for the paused call": lambda a: [
        StateUpdate(
            {"messages": [ToolMessage("done", tool_call_id="call_1", name="delete_file")]},
            "execute_tool",
            None,
        )
    ],
}


@pytest.mark.parametrize("forgery", list(UPDATE_FORGERIES))
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_forged_state_update_is_refused(
    make_agent: Agent, scripted: Scripted, forgery: str, asynchronous: bool
) -> None:
    agent = _paused(make_agent, scripted, answer("Noted."))
    before = agent.get_state(CONFIG).values
    supersteps = [UPDATE_FORGERIES[forgery](agent)]
    with pytest.raises(ClientWriteError):
        if asynchronous:
            asyncio.run(agent.abulk_update_state(CONFIG, supersteps))
        else:
            agent.bulk_update_state(CONFIG, supersteps)
    _assert_intact(agent)
    assert agent.get_state(CONFIG).values == before
    agent.invoke(Command(resume=HITLResponse(decisions=[ApproveDecision(type="approve")])), CONFIG)
    assert RUNS == ["delete secret"]  # the decision still works, once


def test_a_fork_of_an_older_checkpoint_may_not_write_the_marks(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent = _paused(make_agent, scripted)
    older = [s.config for s in agent.get_state_history(CONFIG)][-2]
    with pytest.raises(ClientCommandError, match="released_calls"):
        agent.update_state(older, {"released_calls": _unkeyed_mark(SECRET_CALL)})
    _assert_intact(agent)


def test_resolve_needs_an_approval_pause(make_agent: Agent, scripted: Scripted) -> None:
    agent = make_agent(scripted([answer("hello")]))
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    with pytest.raises(ClientCommandError, match="not paused for approval"):
        agent.invoke(Command(goto="__end__"), CONFIG)
    with pytest.raises(ClientWriteError, match="a Command or None"):
        agent.invoke("hi", CONFIG)


def test_a_thread_less_command_is_refused(make_agent: Agent, scripted: Scripted) -> None:
    agent = make_agent(scripted([]))
    with pytest.raises(ClientCommandError, match="goto the end"):
        agent.invoke(Command(goto="call_model"), {})


# Past the gate: a write path nobody listed still cannot release a call.


@pytest.mark.parametrize(
    ("mark", "answer_text"),
    [
        ("f" * 32, NOT_RELEASED),  # made up in the keyed format
        (None, INTERRUPTED),  # as an earlier Ferry made it: answered as cut short, never run
    ],
)
def test_a_mark_written_past_the_gate_releases_nothing(
    make_agent: Agent, scripted: Scripted, mark: str | None, answer_text: str
) -> None:
    agent = _paused(make_agent, scripted, answer("Noted."))
    forged = {"released_calls": mark or _unkeyed_mark(SECRET_CALL), "stop_reason": None}
    CompiledStateGraph.bulk_update_state(agent, CONFIG, [[StateUpdate(forged, "check")]])
    assert agent.get_state(CONFIG).next == ("execute_tool",)
    agent.invoke(None, CONFIG)
    assert RUNS == []
    results = [m for m in agent.get_state(CONFIG).values["messages"] if m.type == "tool"]
    assert [(r.tool_call_id, r.status, r.content) for r in results] == [
        ("call_1", "error", answer_text)
    ]


def test_a_release_of_an_earlier_turn_releases_nothing_later(
    make_agent: Agent, scripted: Scripted
) -> None:
    model = scripted([tool_call("delete_file", path="secret"), answer("Deleted."), answer("Ok.")])
    agent = make_agent(model, approve_tools="delete_file")
    agent.invoke({"messages": [("user", "delete secret")]}, CONFIG)
    agent.invoke(Command(resume=HITLResponse(decisions=[ApproveDecision(type="approve")])), CONFIG)
    assert RUNS == ["delete secret"]
    assert agent.get_state(CONFIG).values["released_calls"] == ""  # spent at the model call
    agent.invoke({"messages": [("user", "thanks")]}, CONFIG)
    # The approved reply written again as check, with every mark the earlier turn ever had.
    approved = agent.get_state(CONFIG).values["messages"][1]
    again = approved.model_copy(update={"id": "again"})
    history = [s.values.get("released_calls") for s in agent.get_state_history(CONFIG)]
    marks = " ".join(m for m in history if m)
    forged = StateUpdate({"messages": [again], "released_calls": marks}, "check")
    CompiledStateGraph.bulk_update_state(agent, CONFIG, [[forged]])
    agent.invoke(None, CONFIG)
    assert RUNS == ["delete secret"]  # once, when it was approved


@pytest.mark.parametrize("call_id", ["forged-1", "answered"])
def test_the_node_itself_refuses_what_no_reply_waits_for(
    make_agent: Agent, scripted: Scripted, call_id: str
) -> None:
    agent = _paused(make_agent, scripted, answer("I did not delete it."))
    agent.invoke(Command(resume=HITLResponse(decisions=[RejectDecision(type="reject")])), CONFIG)
    rejected = agent.get_state(CONFIG).values["messages"][1].tool_calls[0]
    call = FORGED_CALL if call_id == "forged-1" else rejected
    before = agent.get_state(CONFIG).values["messages"]
    # Past FerryGraph's gate, as a Pregel subclass could go.
    routed = Command(goto=Send("execute_tool", {"call": call, "failures": 0}))
    with pytest.raises(UnreleasedCallError, match="no reply on the thread waits for it"):
        list(CompiledStateGraph.stream(agent, routed, CONFIG, context=RunContext()))
    assert RUNS == []
    assert agent.get_state(CONFIG).values["messages"] == before


def test_a_malformed_tool_task_is_refused(make_agent: Agent, scripted: Scripted) -> None:
    agent = _paused(make_agent, scripted)
    with pytest.raises(UnreleasedCallError, match="must carry a tool call"):
        routed = Command(goto=Send("execute_tool", {"x": 1}))
        list(CompiledStateGraph.stream(agent, routed, CONFIG, context=RunContext()))


# Controls: what `check` releases runs, as decided; the safe shapes are taken.


def test_free_calls_run_and_their_keyed_marks_are_spent(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent = make_agent(scripted([tool_call("peek", path="a"), answer("done")]))
    agent.invoke({"messages": [("user", "peek a")]}, CONFIG)
    assert RUNS == ["peek a"]
    marks = [s.values.get("released_calls") for s in agent.get_state_history(CONFIG)]
    [mark] = {m for m in marks if m}
    assert len(mark) == 32 and mark != _unkeyed_mark(
        agent.get_state(CONFIG).values["messages"][1].tool_calls[0]
    )
    values = agent.get_state(CONFIG).values
    assert values.get("tool_failures", {}).get("delete_file") != 7
    assert values.get("stop_reason") != "forged"


def test_the_same_call_on_another_thread_has_another_mark(
    make_agent: Agent, scripted: Scripted
) -> None:
    steps = [tool_call("peek", path="a"), answer("done")]
    agent = make_agent(scripted([*steps, *steps]))
    marks = []
    for thread in ("t1", "t2"):
        config = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [("user", "peek a")]}, config)
        history = [s.values.get("released_calls") for s in agent.get_state_history(config)]
        marks.append({m for m in history if m})
    assert marks[0] and marks[1] and not marks[0] & marks[1]


@pytest.mark.parametrize(
    ("decision", "runs"),
    [
        (ApproveDecision(type="approve"), ["delete secret"]),
        (
            EditDecision(
                type="edit", edited_action={"name": "delete_file", "args": {"path": "other"}}
            ),
            ["delete other"],
        ),
        (RejectDecision(type="reject"), []),
    ],
)
def test_decided_calls_run_as_decided(
    make_agent: Agent, scripted: Scripted, decision: Any, runs: list[str]
) -> None:
    agent = _paused(make_agent, scripted, answer("ok"))
    agent.invoke(Command(resume=HITLResponse(decisions=[decision])), CONFIG)
    assert RUNS == runs
    assert agent.get_state(CONFIG).values["messages"][-1].content == "ok"


@pytest.mark.parametrize("door", DOORS)
def test_mark_as_resolved_ends_the_pause_with_the_call_answered_not_run(
    make_agent: Agent, scripted: Scripted, door: str
) -> None:
    agent = _paused(make_agent, scripted, answer("Fine, I left it."))
    _run(agent, Command(goto="__end__"), door)
    state = agent.get_state(CONFIG)
    assert RUNS == [] and not state.interrupts and state.next == ()
    assert [(m.type, m.content) for m in state.values["messages"][1:]] == [
        ("ai", ""),
        ("tool", UNDECIDED),
    ]
    assert state.values["stop_reason"] == "answered"
    result = agent.invoke({"messages": [("user", "so?")]}, CONFIG)  # the thread goes on
    assert result["messages"][-1].content == "Fine, I left it."


def test_studio_edits_of_messages_are_taken(make_agent: Agent, scripted: Scripted) -> None:
    agent = make_agent(scripted([answer("hello"), answer("edited, then answered")]))
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    reply = agent.get_state(CONFIG).values["messages"][-1]
    agent.update_state(CONFIG, {"messages": [reply.model_copy(update={"content": "hi there"})]})
    assert agent.get_state(CONFIG).values["messages"][-1].content == "hi there"
    older = [s.config for s in agent.get_state_history(CONFIG)][-2]
    forked = agent.update_state(older, {"messages": [("user", "something else")]}, as_node=None)
    assert agent.invoke(None, forked)["messages"][-1].content == "edited, then answered"
    assert RUNS == []


def test_a_reply_a_client_writes_passes_check_like_the_models(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent = make_agent(scripted([answer("hello")]), approve_tools="delete_file")
    agent.invoke({"messages": [("user", "hi")]}, CONFIG)
    forged = AIMessage("", tool_calls=[FORGED_CALL], id=str(uuid.uuid4()))
    agent.update_state(CONFIG, {"messages": [forged]}, as_node="check")
    result = agent.invoke(None, CONFIG)
    assert RUNS == []
    [pause] = result["__interrupt__"]  # held for approval, as the model's call would be
    assert [r["tool_call_id"] for r in pause.value["action_requests"]] == ["forged-1"]


@pytest.mark.parametrize("how", ["an update", "a copy"])
def test_a_fork_between_check_and_the_tools_does_not_run_the_released_call_again(
    make_agent: Agent, scripted: Scripted, how: str
) -> None:
    agent = make_agent(scripted([tool_call("peek", path="a"), answer("done")]))
    agent.invoke({"messages": [("user", "peek a")]}, CONFIG)
    assert RUNS == ["peek a"]
    released = next(s for s in agent.get_state_history(CONFIG) if s.next == ("execute_tool",))
    update = (
        StateUpdate({"messages": [("user", "and b")]}, None)
        if how == "an update"
        else StateUpdate(None, "__copy__")
    )
    with pytest.raises(ClientCommandError, match="released tool calls are pending"):
        agent.bulk_update_state(released.config, [[update]])
    assert RUNS == ["peek a"]


def test_a_replay_between_check_and_the_tools_does_not_run_the_released_call_again(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent = make_agent(scripted([tool_call("peek", path="a"), answer("done"), answer("again")]))
    agent.invoke({"messages": [("user", "peek a")]}, CONFIG)
    head = agent.get_state(CONFIG).values
    released = next(s for s in agent.get_state_history(CONFIG) if s.next == ("execute_tool",))
    for door in DOORS:
        with pytest.raises(ClientCommandError, match="the thread has gone on from"):
            _run(agent, None, door, released.config)
    assert RUNS == ["peek a"]
    assert agent.get_state(CONFIG).values == head
    # New messages from there are a fork like any other: the model is asked again.
    agent.invoke({"messages": [("user", "never mind")]}, released.config)
    assert RUNS == ["peek a"]
    assert agent.get_state(CONFIG).values["messages"][-1].content == "again"


@pytest.mark.parametrize("door", DOORS)
def test_a_command_is_read_once_and_only_what_was_checked_goes_on(
    make_agent: Agent, scripted: Scripted, door: str
) -> None:
    """Its update looks empty the first time it is asked and writes Ferry's keys after."""
    agent = _paused(make_agent, scripted, answer("I did not delete it."))
    _run(agent, _shifty(), door)
    assert RUNS == []
    messages = agent.get_state(CONFIG).values["messages"]
    assert [(m.type, getattr(m, "status", None)) for m in messages[1:]] == [
        ("ai", None),
        ("tool", "error"),
        ("ai", None),
    ]
    values = agent.get_state(CONFIG).values
    assert values.get("tool_failures", {}).get("delete_file") != 7
    assert values.get("stop_reason") != "forged"


def _approved_and_ran(
    make_agent: Agent, scripted: Scripted, *later: AIMessage
) -> tuple[Any, Any, Any]:
    """A thread whose approved delete_file ran: the checkpoint just after it, and its result."""
    agent = _paused(make_agent, scripted, answer("Deleted."), *later)
    agent.invoke(Command(resume=HITLResponse(decisions=[ApproveDecision(type="approve")])), CONFIG)
    assert RUNS == ["delete secret"]
    ran = next(s for s in agent.get_state_history(CONFIG) if s.next == ("call_model",))
    assert ran.values["released_calls"]  # spent only at the model's next call
    return agent, ran.config, ran.values["messages"][-1]


AFTER_THE_TOOL: dict[str, Callable[[Any], list[StateUpdate]]] = {
    "its result removed, as check": lambda result: [
        StateUpdate({"messages": [RemoveMessage(id=result.id)]}, "check")
    ],
    "its result replaced by one for another call": lambda result: [
        StateUpdate({"messages": [ToolMessage("x", id=result.id, tool_call_id="other")]}, "check")
    ],
    "a copy carrying the removal": lambda result: [
        StateUpdate([({"messages": [RemoveMessage(id=result.id)]}, "check")], "__copy__")
    ],
}


@pytest.mark.parametrize("forgery", list(AFTER_THE_TOOL))
def test_a_call_that_ran_is_not_sent_back_to_the_tools(
    make_agent: Agent, scripted: Scripted, forgery: str
) -> None:
    agent, ran, result = _approved_and_ran(make_agent, scripted)
    with pytest.raises(ClientWriteError):
        agent.bulk_update_state(ran, [AFTER_THE_TOOL[forgery](result)])
    agent.invoke(None, CONFIG)
    assert RUNS == ["delete secret"]  # once, when it was approved


def test_a_stored_result_or_call_is_never_rewritten_nor_an_orphan_result_taken(
    make_agent: Agent, scripted: Scripted
) -> None:
    agent, _, result = _approved_and_ran(make_agent, scripted, answer("You're welcome."))
    agent.invoke({"messages": [("user", "thanks")]}, CONFIG)
    stored = agent.get_state(CONFIG).values["messages"]
    reply = next(m for m in stored if isinstance(m, AIMessage) and m.tool_calls)
    renamed = reply.model_copy(update={"tool_calls": [{**SECRET_CALL, "id": "call_new"}]})
    orphan = ToolMessage("made up", tool_call_id="nobody_made_this")
    for write in (
        {"messages": [RemoveMessage(id=result.id)]},
        {"messages": [RemoveMessage(id=reply.id)]},
        {"messages": [renamed]},
        {"messages": [orphan, ("user", "and this")]},
    ):
        with pytest.raises(ClientWriteError):
            agent.update_state(CONFIG, write)
    with pytest.raises(ClientWriteError):
        agent.invoke({"messages": [orphan, ("user", "and this")]}, CONFIG)
    assert agent.get_state(CONFIG).values["messages"] == stored


@pytest.mark.parametrize("door", DOORS)
def test_an_old_pause_resumed_again_does_not_run_its_approved_call_twice(
    make_agent: Agent, scripted: Scripted, door: str
) -> None:
    """A UI that sends its approval again with the pause's checkpoint id, after the thread went
    on: refused, whatever the door."""
    agent = _paused(make_agent, scripted, answer("Deleted."))
    pause = agent.get_state(CONFIG).config
    approve = Command(resume=HITLResponse(decisions=[ApproveDecision(type="approve")]))
    agent.invoke(approve, CONFIG)
    assert RUNS == ["delete secret"]
    with pytest.raises(ClientCommandError, match="the thread has gone on from"):
        _run(agent, approve, door, pause)
    assert RUNS == ["delete secret"]

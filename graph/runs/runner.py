"""One turn runner behind `ask`, `chat` and `resume`: in this process here, on Temporal beside.

As openai-agents' `Runner` goes through one `AgentRunner` and pydantic-ai's `TemporalAgent` is
used exactly like the plain agent, a front end is written once against `TurnRunner` and only
picks which one runs its turns: `InProcessRunner` (this module) runs the compiled graph in this
process; `TemporalRunner` (graph/temporal/runner.py) hands the turn to Temporal's workers and
watches it. Both show the same events, and the same report, read from what the turn stored.

A turn's events, in order: `Started` once it holds its thread (a turn refused as busy raises
instead, having shown nothing), then `Line`s (a tool call asked for, a result) and `Token`s (the
model's reply as it comes), and last `Paused` (calls wait for a person's decision: `decide`
continues) or `Finished`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage

from graph.core.messages import unanswered_calls
from graph.runs.background import run_cancelled, run_in_background
from graph.runs.progress import call_line, record_update
from graph.runs.report import message_ids, pending_approvals_of, turn_report

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import StreamMode

    from graph.builder import FerryGraph


@dataclass(frozen=True)
class Started:
    """The turn holds its thread and runs."""


@dataclass(frozen=True)
class Line:
    """A progress line: a tool call asked for, or its result."""

    text: str


@dataclass(frozen=True)
class Token:
    """The next piece of the model reply `reply_id`, as it is written."""

    reply_id: str
    text: str


@dataclass(frozen=True)
class Paused:
    """The turn waits for a person's decision on `pending` (as the stored thread holds them)."""

    report: dict[str, Any]
    pending: list[dict[str, Any]]


@dataclass(frozen=True)
class Finished:
    """The turn ended: answered, or stopped by a guard; `report` is `--json`'s object."""

    report: dict[str, Any]


Event = Started | Line | Token | Paused | Finished


Cancelled = Literal["cancelled", "ended"] | None
"""What a cancel found: a turn it stopped, a turn that ended on its own before the cancel
reached it (its last step was finishing), or None when no turn was running."""


class TurnRunner(Protocol):
    """Runs a thread's turns and shows each as its events; the same for every back end."""

    graph: FerryGraph
    """The graph on the stored threads, to read them (the Temporal runner's runs no turn)."""
    leaves_turn_running: bool
    """Whether a client that leaves (Ctrl-C) leaves the turn running (True on Temporal); in this
    process it is cancelled at its next step boundary instead."""

    def start(
        self, thread_id: str, question: HumanMessage | None, schema: str | None = None
    ) -> Iterator[Event]:
        """Ask `question` on the thread; None continues its unfinished run (resume).

        `schema`: a JSON schema the answer must match (graph/output.py).
        """

    def attach(self, thread_id: str) -> Iterator[Event] | None:
        """Watch the thread's turn running elsewhere now, or None if none runs."""

    def decide(
        self, thread_id: str, decision: dict[str, Any], schema: str | None = None
    ) -> Iterator[Event]:
        """Continue the thread's paused turn with a person's `{"decisions": [...]}`."""

    def last_turn(self, thread_id: str, state: Any) -> Iterator[Event] | None:
        """The end of the thread's last turn, if it ended while its client was away.

        Its answer and its report, when the thread as stored (`state`) ends with it; else None.
        """

    def cancel(self, thread_id: str) -> Cancelled:
        """Stop the thread's running turn and wait until it stopped; how it stopped."""


def _nothing() -> None:
    """Do nothing."""


@dataclass
class InProcessRunner:
    """Runs turns on the compiled graph in this process, read from a daemon thread.

    `interactive`: a person can decide paused calls now (otherwise only a decision passed with
    the command is a person's). `on_stopped` is called once a run has stopped and its outcome is
    stored, before it is read (the CLI then records Ctrl-C instead of raising it).
    """

    graph: FerryGraph
    interactive: bool = False
    on_stopped: Callable[[], None] = _nothing
    leaves_turn_running: bool = False
    # Where this runner's turn on each thread started: its report counts what was stored since.
    _before: dict[str, frozenset[str]] = field(default_factory=dict)

    def start(
        self, thread_id: str, question: HumanMessage | None, schema: str | None = None
    ) -> Iterator[Event]:
        """Ask `question` on the thread; None continues its unfinished run (resume)."""
        self._before.pop(thread_id, None)
        graph_input = None if question is None else {"messages": [question]}
        return self._run(thread_id, graph_input, schema, announce=question is None)

    def attach(self, thread_id: str) -> Iterator[Event] | None:
        """None: a turn runs in-process only while its command does."""
        return None

    def decide(
        self, thread_id: str, decision: dict[str, Any], schema: str | None = None
    ) -> Iterator[Event]:
        """Continue the paused run with the decisions."""
        from langgraph.types import Command

        first = thread_id not in self._before  # else its calls were shown when asked for
        return self._run(thread_id, Command(resume=decision), schema, announce=first)

    def last_turn(self, thread_id: str, state: Any) -> Iterator[Event] | None:
        """None: an in-process turn ends with its command."""
        return None

    def cancel(self, thread_id: str) -> Cancelled:
        """None: no turn runs in-process without its command, which Ctrl-C cancels."""
        return None

    def _run(
        self, thread_id: str, graph_input: Any, schema: str | None, *, announce: bool
    ) -> Iterator[Event]:
        from langgraph.types import Command

        from graph.nodes import CAN_APPROVE

        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        config["callbacks"] = [StopCancelledAnswer()]  # Ctrl-C in chat: the reply is not stored
        if schema is not None:
            from graph.output import RUN_KEY

            # As an object: LangGraph copies a run's text settings into every checkpoint's
            # metadata.
            config["configurable"][RUN_KEY] = json.loads(schema)
        decided = isinstance(graph_input, Command)
        config["configurable"][CAN_APPROVE] = self.interactive or decided
        state = self.graph.get_state(config)
        before = self._before.setdefault(thread_id, message_ids(state))
        for index, event in enumerate(self._stream(graph_input, config)):
            if index == 0:
                yield Started()
                if announce:
                    yield from resumed_calls(state, decided=decided)
            if event is not None:
                yield event
        self.on_stopped()  # a Ctrl-C from here loses nothing
        state = self.graph.get_state(config)
        report = turn_report(thread_id, state, before)
        pending = pending_approvals_of(state)
        yield Paused(report, pending) if pending else Finished(report)

    def _stream(self, graph_input: Any, config: RunnableConfig) -> Iterator[Event | None]:
        """The run's events to its next stop; None for a stream event that shows nothing.

        In a thread of its own, so Ctrl-C stops the reader at once instead of waiting for the
        run. The first item comes once the run holds its thread.
        """
        from graph.nodes import RunContext

        modes: list[StreamMode] = ["messages", "updates"]  # a list: a tuple is not read as modes
        events = run_in_background(
            lambda: self.graph.stream(graph_input, config, stream_mode=modes, context=RunContext())
        )
        streaming = None  # the id of the reply whose tokens are coming
        for event in events:
            mode, chunk = cast(tuple[str, Any], event)  # with several modes, events are pairs
            if mode == "messages":
                message, _meta = chunk
                if isinstance(message, AIMessageChunk | AIMessage):
                    if streaming not in (None, message.id):
                        # A second reply in the same model step: the first was cut short,
                        # dropped and asked for again (graph/nodes.py); say so.
                        yield Line("(the reply was cut short; asking the model again)")
                    streaming = message.id
                    yield Token(str(message.id), message.text)
                else:
                    yield None
                continue
            streaming = None
            lines = _Lines()
            if not chunk.get("__metadata__", {}).get("cached"):  # replays of pre-crash results
                for node, update in chunk.items():
                    record_update(node, update, lines)
            yield from lines.lines or [None]


class _Lines:
    """The progress lines of one streamed update (`record_update`'s `Notes`)."""

    def __init__(self) -> None:
        self.lines: list[Event | None] = []

    def reply(self, message: AIMessage) -> None:
        """Nothing: a reply is shown from its tokens as they arrive."""

    def note(self, line: str) -> None:
        """Keep a progress line."""
        self.lines.append(Line(line))


def resumed_calls(state: Any, *, decided: bool) -> Iterator[Line]:
    """The calls a resumed run is about to run, shown as when the model asks for them.

    Not those whose results were stored before the interruption (they are replayed), nor,
    unless a decision came with the resume, those still awaiting approval.
    """
    finished = {
        message.tool_call_id
        for task in state.tasks
        if isinstance(task.result, dict)
        for message in task.result.get("messages", [])
        if isinstance(message, ToolMessage)
    }
    held = set() if decided else {call["id"] for call in pending_approvals_of(state)}
    messages: list[BaseMessage] = state.values.get("messages") or []
    for call in unanswered_calls(messages):
        if call["id"] not in finished | held:
            yield Line(call_line(call))


class AnswerCancelled(BaseException):
    """Raised inside a cancelled run's model call; a BaseException, so no handler logs it."""


class StopCancelledAnswer(BaseCallbackHandler):
    """Ends the model call of a run Ctrl-C cancelled, at its next token or at its end."""

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        """Stop a streamed reply as soon as its run is cancelled."""
        if run_cancelled():
            raise AnswerCancelled

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Drop a reply that arrived whole (no stream) after its run was cancelled."""
        if run_cancelled():
            raise AnswerCancelled

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing; without it LangChain formats every prompt message as text for `on_llm_start`."""

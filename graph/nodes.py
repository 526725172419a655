"""The loop's three nodes: call the model, check its reply, execute one tool call."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from graph import guards, output, tracing
from graph.core.messages import all_calls, error_result, turn_start, unanswered_calls
from graph.core.run import CAN_APPROVE, RunContext, emit, run_ids, seconds_left
from graph.core.settings import ConfigError, Settings
from graph.execution import (
    NOT_RERUN,
    forget_start,
    node_output,
    results_of,
    run_call,
    started_before,
    tool_node,
)
from graph.lifecycle import ToolTask
from graph.models import make_model
from graph.models.calls import ModelTimeout, ReplyCutShort, cut_short, invoke_within
from graph.policy import approval, releases
from graph.prompt import (
    ImageDelivery,
    bounded,
    image_delivery,
    stored_summary,
    summary_allowance,
    summary_covers,
    summary_note,
    summary_request,
    with_images_placed,
)
from graph.provenance import OFFERED
from graph.state import FerryState, StopReason, Summary, merge_messages
from graph.storage.internals import task_state
from tools import memory
from tools.settings import ToolSettings, with_tool_settings

log = logging.getLogger("ferry.loop")
__all__ = ["CAN_APPROVE", "AgentNodes", "RunContext"]


@dataclass
class AgentNodes:
    """The nodes, bound to one set of settings, tools and model."""

    settings: Settings
    tools: list[BaseTool]
    model: BaseChatModel | None = None
    response_format: output.ResponseFormat | None = None
    """The graph's answer schema; a run may send its own (graph/output.py)."""
    _slots: threading.BoundedSemaphore = field(init=False)
    _answering: dict[str, tuple[Any, Runnable[Any, Any]]] = field(init=False, default_factory=dict)
    _answering_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # Bounds tool calls running at once across all tasks of this graph in this process.
        self._slots = threading.BoundedSemaphore(self.settings.max_parallel_tools)
        if self.model is not None:  # a model that cannot call tools fails at build time
            _ = self.bound_model

    @cached_property
    def tools_by_name(self) -> dict[str, BaseTool]:
        """The registry, by name."""
        return {tool.name: tool for tool in self.tools}

    @cached_property
    def tool_node(self) -> ToolNode:
        """LangGraph's tool runner, with Ferry's timeout around each call."""
        return tool_node(self.tools)

    @cached_property
    def tool_settings(self) -> ToolSettings:
        """The part of the settings each tool call is handed."""
        return self.settings.tool_settings()

    @cached_property
    def image_delivery(self) -> ImageDelivery:
        """How tool results' images reach this model: fixed by its profile and the settings."""
        return image_delivery(self.bound_model, self.settings.tool_images)

    @cached_property
    def chat_model(self) -> BaseChatModel:
        """The model, built on first use so imports need no key."""
        return self.model or make_model(self.settings.model)

    @cached_property
    def bound_model(self) -> Runnable[Any, Any]:
        """The model with the tools bound.

        Raises:
            ConfigError: There are tools and the model cannot call tools.
        """
        if not self.tools:  # some models (LangChain's fakes) implement no `bind_tools`
            return self.chat_model
        return self._bound(self.tools)

    def _bound(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        try:
            return self.chat_model.bind_tools(tools, **kwargs)
        except NotImplementedError as exc:
            raise ConfigError(
                f"{type(self.chat_model).__name__} cannot call tools (its bind_tools is not "
                "implemented): pass tools=[] or a model that supports tool calling"
            ) from exc

    def answering_model(self, answer: output.ResponseFormat | None) -> Runnable[Any, Any]:
        """The model that writes this run's replies: with the answer tool, if it has a schema.

        A call is required (`tool_choice="any"`, as `create_agent` does): a Ferry tool's or
        the answer tool's, so a reply in words cannot stand in for the answer.
        """
        if answer is None:
            return self.bound_model
        with self._answering_lock:
            bound = self._answering.get(answer.name)
            if bound is None or bound[0] != answer:
                bound = (answer, self._bound([*self.tools, answer.as_tool()], tool_choice="any"))
                if len(self._answering) >= 64:  # clients name schemas as they like: a bound
                    self._answering.pop(next(iter(self._answering)))
                self._answering[answer.name] = bound
        return bound[1]

    def answer_format(
        self, sent: output.ResponseFormat | None, state: FerryState, *, new_turn: bool = False
    ) -> output.ResponseFormat | None:
        """The turn's answer schema: the run's (`sent`), else its turn's first, else the graph's.

        A turn keeps the schema a run sent when it began (`answer_schema`), so a resume answers
        in it without being sent it again. Its answer tool never takes a tool's name.
        """
        answer = sent
        stored = state.get("answer_schema")
        if answer is None and stored is not None and not new_turn:
            answer = output.of_run({"configurable": {output.RUN_KEY: stored}}, None)
        answer = answer or self.response_format
        return output.unclashed(answer, self.tools_by_name) if answer is not None else None

    def call_model(
        self, state: FerryState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        """Repair unanswered calls, apply the time budget, then ask the model for its next step.

        Raises:
            ValueError: the thread has no messages: there is nothing to answer.
        """
        messages = state.get("messages") or []
        if not messages:
            raise ValueError("the thread has no messages to answer: send a user message first")
        new_turn = isinstance(messages[-1], HumanMessage)
        sent = output.of_run(config, None)
        model = self.answering_model(self.answer_format(sent, state, new_turn=new_turn))
        # A user message last means a new turn: the previous turn's ending no longer holds.
        update: dict[str, Any] = {"stop_reason": None} if new_turn else {}
        if new_turn and state.get("structured_response") is not None:
            update["structured_response"] = None
        kept = sent.json_schema if sent is not None else None
        if (new_turn or sent is not None) and state.get("answer_schema") != kept:
            update["answer_schema"] = kept  # the turn's, for its resumes
        if state.get(releases.RELEASED):  # spent: nothing released before releases after
            update[releases.RELEASED] = ""
        ids = run_ids(config, runtime)
        repairs = self._repairs(messages)
        for result in repairs:
            emit(
                "repaired an unanswered tool call", ids, "repair", tool_call_id=result.tool_call_id
            )
        if seconds_left(self.settings, runtime) <= 0:
            return self._stop(guards.turn_counters(messages), update, repairs, "time_budget", ids)
        history = merge_messages(messages, repairs) if repairs else messages
        offered = self._memories(history, config, runtime)
        prompt = _with_memories(self._prompt(history, state, update, runtime, ids), offered)
        prompt = with_images_placed(prompt, self.image_delivery)
        reply = self._complete_reply(model, prompt, config, runtime, ids)
        if reply is None:
            return self._stop(guards.turn_counters(messages), update, repairs, "time_budget", ids)
        reply.id = reply.id or str(uuid.uuid4())
        if offered:  # the model saw them: private data in this thread from now on
            reply.response_metadata[OFFERED] = [m.id for m in offered]
        update["messages"] = [*repairs, reply]
        return update

    def _memories(
        self, messages: Sequence[AnyMessage], config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> list[memory.Memory]:
        """The user's memories offered to the model this turn.

        Those sharing words with its question, within an allowance (a twentieth of the prompt,
        2000 characters at most).
        """
        if runtime.store is None or "remember" not in self.tools_by_name:
            return []
        asked = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        if asked is None:
            return []
        allowance = min(2_000, self.settings.context_tokens // 5)
        user = memory.user_of(with_tool_settings(config, self.tool_settings))
        return memory.relevant(runtime.store, user, asked.text, allowance)

    @cached_property
    def summary_model(self) -> BaseChatModel:
        """The model that writes summaries: `FERRY_SUMMARY_MODEL`, or the thread's own."""
        if self.settings.summary_model:
            return make_model(self.settings.summary_model)
        return self.chat_model

    def _prompt(
        self,
        history: list[AnyMessage],
        state: FerryState,
        update: dict[str, Any],
        runtime: Runtime[RunContext],
        ids: dict[str, Any],
    ) -> list[BaseMessage]:
        """The prompt: the history bounded, with the summary of what it leaves out.

        A compaction writes the summary into `update`, to be stored with the reply.
        """
        tokens = self.settings.context_tokens
        if self.settings.compaction == "drop":
            return bounded(history, tokens, 0).messages
        prompt = bounded(history, tokens, summary_allowance(tokens))
        if prompt.left_out is None:
            return prompt.messages
        stored = state.get("summary")
        if summary_covers(stored, prompt.left_out):
            assert stored is not None
            return prompt.with_note(summary_note(stored))
        written = self._summarise(stored, history, prompt.left_out, runtime, ids)
        if written is None:
            return prompt.messages
        update["summary"] = written
        return prompt.with_note(summary_note(written))

    def _summarise(
        self,
        previous: Summary | None,
        history: list[AnyMessage],
        left_out: tuple[int, int],
        runtime: Runtime[RunContext],
        ids: dict[str, Any],
    ) -> Summary | None:
        """The summary extended to the messages left out; None if it could not be written."""
        tokens = self.settings.context_tokens
        asked, first = summary_request(previous, history, left_out, tokens)
        seconds = seconds_left(self.settings, runtime)
        started = time.monotonic()
        try:
            # Not streamed: its tokens are not the answer's.
            config: RunnableConfig = {"tags": [TAG_NOSTREAM], "run_name": "ferry_summary"}
            reply = invoke_within(self.summary_model, asked, config, seconds)
        except Exception as exc:  # noqa: BLE001 - the turn goes on with the note instead
            emit(
                "summary not written: the model is told turns were left out",
                ids,
                "compaction_failed",
                logging.WARNING,
                error=type(exc).__name__,
            )
            return None
        emit(
            "compaction: turns left out of the prompt summarised",
            ids,
            "compaction",
            duration_ms=round((time.monotonic() - started) * 1000),
            summarised_from=first,
            summarised_through=left_out[1],
        )
        return stored_summary(reply.text, previous, first, left_out, tokens)

    def _complete_reply(
        self,
        model: Runnable[Any, Any],
        prompt: Sequence[BaseMessage],
        config: RunnableConfig,
        runtime: Runtime[RunContext],
        ids: dict[str, Any],
    ) -> AIMessage | None:
        """The model's whole reply within the time left; None if the time runs out first.

        A reply cut short (its stream ended without a finish reason) is neither run nor stored:
        the model is asked once more, and a second cut ends the run with an error, leaving the
        turn to resume.

        Raises:
            ReplyCutShort: Both replies were cut short.
        """
        for _attempt in range(2):
            seconds = seconds_left(self.settings, runtime)
            if seconds <= 0:
                return None
            started = time.monotonic()
            try:
                with tracing.model_call(runtime.context, ids) as span:
                    reply = invoke_within(model, prompt, config, seconds)
                    cut = cut_short(reply)
                    tracing.describe_reply(span, reply, cut_short=cut)
            except ModelTimeout:
                emit("model call abandoned: time budget", ids, "model_timeout", logging.WARNING)
                return None
            duration_ms = round((time.monotonic() - started) * 1000)
            calls = len(reply.tool_calls) + len(reply.invalid_tool_calls)
            emit("model call", ids, "model_call", duration_ms=duration_ms, ferry_calls=calls)
            if not cut:
                return reply
            emit("model reply cut short", ids, "model_cut_short", logging.WARNING)
        raise ReplyCutShort(
            "The model's reply was cut short twice (its stream ended without a finish reason); "
            "nothing of it was stored or run. Resume the thread to ask again."
        )

    def _repairs(self, messages: list[AnyMessage]) -> list[ToolMessage]:
        """Error results for the calls left unanswered, saying whether they awaited approval.

        A call still waiting for a decision when new input arrives did not run because no one
        approved it; telling the model so keeps it from simply trying again.
        """
        unanswered = unanswered_calls(messages)
        if not unanswered:
            return []
        waiting = approval.gate(
            unanswered,
            messages=messages,
            tools=self.tools_by_name,
            settings=self.settings,
            can_approve=True,
            also_private=offered_memories(messages),
        )
        held = {c["id"] for c in waiting.held}
        return [
            error_result(c, approval.UNDECIDED if c["id"] in held else self._cut_short(c))
            for c in unanswered
        ]

    def _cut_short(self, call: ToolCall) -> str:
        """What a call the run never finished is answered with, by whether it may run twice."""
        tool = self.tools_by_name.get(call["name"])
        if tool is not None and not (tool.metadata or {}).get("retry_safe", True):
            return guards.INTERRUPTED_SIDE_EFFECT.format(tool=call["name"])
        return guards.INTERRUPTED

    def _stop(
        self,
        counters: Mapping[str, Any],
        update: dict[str, Any],
        before: list[Any],
        reason: StopReason,
        ids: dict[str, Any],
    ) -> dict[str, Any]:
        """End the turn: answer `before`'s calls, then a final message saying why."""
        emit(f"guard fired: {reason}", ids, "guard", logging.WARNING, ferry_reason=reason)
        update["messages"] = [*before, guards.stop_message(reason, counters)]
        update["stop_reason"] = reason
        return update

    def check(
        self, state: FerryState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        """Decide: answer, stop on a guard, or run the requested calls minus refused ones."""
        reply = state["messages"][-1]
        ids = run_ids(config, runtime)
        answer = self.answer_format(output.of_run(config, None), state)
        if not isinstance(reply, AIMessage) or not all_calls(reply):
            if answer is not None and isinstance(reply, AIMessage) and not state.get("stop_reason"):
                return _answered_in_words(reply, answer, ids)
            return {"stop_reason": state.get("stop_reason") or "answered"}
        calls, answered = reply.tool_calls, list[ToolMessage]()
        if answer is not None:
            ended, answered = self._answer_calls(reply, answer, state["messages"], ids)
            if ended is not None:
                return ended
            calls = [c for c in calls if c["name"] != answer.name]
        reason = guards.budget_exceeded(
            state["messages"], self.settings, seconds_left(self.settings, runtime)
        )
        if reason:
            not_run = [
                error_result(c, f"Not executed: the turn stopped ({reason}).")
                for c in all_calls(reply)
            ]
            counters = guards.turn_counters(state["messages"])
            return self._stop(counters, {}, not_run, reason, ids)
        disabled = {
            n
            for n, count in (state.get("tool_failures") or {}).items()
            if count >= self.settings.breaker_threshold
        }
        # Calls whose arguments did not parse are answered with what was wrong, so the model
        # can call again; the rest of the reply's calls still run.
        refused = [*guards.invalid_call_results(reply), *answered] + guards.refusals(
            calls,
            available=list(self.tools_by_name),
            disabled=disabled,
            messages=state["messages"],
        )
        for result in refused:
            emit("refused a tool call", ids, "refused", tool_call_id=result.tool_call_id)
        written, released = self._gated(reply, refused, state["messages"], config, ids)
        marks = releases.release(released, state["messages"], ids["thread_id"] or "")
        update: dict[str, Any] = {releases.RELEASED: marks}
        return {"messages": written, **update} if written else update

    def _answer_calls(
        self,
        reply: AIMessage,
        answer: output.ResponseFormat,
        messages: list[AnyMessage],
        ids: dict[str, Any],
    ) -> tuple[dict[str, Any] | None, list[ToolMessage]]:
        """The reply's calls of the answer tool: the turn's end, or results sending them back.

        A valid answer alone in its reply ends the turn, stored as `structured_response`. An
        answer beside other calls is sent back (the other calls' results may change it); an
        invalid one is sent back with what was wrong, until `FERRY_OUTPUT_RETRIES` are spent.
        """
        mine = [c for c in reply.tool_calls if c["name"] == answer.name]
        if not mine:
            return None, []
        if len(all_calls(reply)) > 1:
            alone = f"Not accepted: call {answer.name} alone, once the other calls are answered."
            return None, [output.answer_result(error_result(c, alone), "not_alone") for c in mine]
        call = mine[0]
        try:
            value = answer.validate(call["args"])
        except output.InvalidAnswer as exc:
            result = output.answer_result(
                error_result(
                    call,
                    f"Not accepted: the answer does not match the schema: {exc}. "
                    f"Call {answer.name} again with the answer corrected.",
                ),
                "invalid",
            )
            tries = 1 + sum(
                output.is_answer(m, "invalid") for m in messages[turn_start(messages) :]
            )
            emit("answer does not match the schema", ids, "invalid_output", tries=tries)
            if tries > self.settings.output_retries:
                counters = guards.turn_counters(messages)
                return self._stop(counters, {}, [result], "invalid_output", ids), []
            return None, [result]
        emit("structured answer", ids, "structured_output")
        accepted = output.answer_result(
            ToolMessage(
                "Answer recorded.",
                tool_call_id=call["id"] or "",
                name=answer.name,
                id=str(uuid.uuid4()),
            ),
            "accepted",
        )
        return {"messages": [accepted], "structured_response": value, "stop_reason": "answered"}, []

    def _gated(
        self,
        reply: AIMessage,
        refused: list[ToolMessage],
        messages: list[AnyMessage],
        config: RunnableConfig,
        ids: dict[str, Any],
    ) -> tuple[list[AnyMessage], list[ToolCall]]:
        """Refuse or hold for approval what must not simply run.

        Returns the messages to write and the calls released to run, as a person edited them.
        """
        refused_ids = {m.tool_call_id for m in refused}
        gate = approval.gate(
            [c for c in reply.tool_calls if c["id"] not in refused_ids],
            messages=messages,
            tools=self.tools_by_name,
            settings=self.settings,
            can_approve=config.get("configurable", {}).get(CAN_APPROVE, True),
            also_private=offered_memories(messages),
        )
        # The ids only: the quoted fragment may be the very secret, and logs travel.
        for result in gate.refused:
            message = "exfiltration guard refused a call"
            emit(message, ids, "exfiltration", logging.WARNING, tool_call_id=result.tool_call_id)
        for call_id in gate.reasons:
            emit("exfiltration guard held a call", ids, "exfiltration", tool_call_id=call_id)
        written: list[AnyMessage] = [*refused, *gate.refused]
        calls = reply.tool_calls
        if gate.held:
            edited, rejected = approval.decide(reply, gate)
            written = [*([edited] if edited else []), *written, *rejected]
            calls = edited.tool_calls if edited else calls
        answered = {m.tool_call_id for m in written if isinstance(m, ToolMessage)}
        return written, [c for c in calls if c["id"] not in answered]

    def execute_tool(
        self, task: ToolTask, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any] | list[Any]:
        """Run one tool call `check` released, within its timeout and the time left; answer it.

        The task is checked against the stored thread first: a client can route a run or write
        as a node, and a call sent here any other way than by `check` must not run.

        Raises:
            UnreleasedCallError: no stored reply waits for the task's call.
        """
        run = run_ids(config, runtime)
        not_released = releases.unreleased(task, task_state(config), run["thread_id"] or "")
        call = task["call"]
        ids = {**run, "tool_call_id": call["id"], "tool": call["name"]}
        tool = self.tools_by_name.get(call["name"])
        if not_released == releases.RELEASED_BEFORE_AN_UPGRADE:  # cut short, never run now
            text = (
                guards.INTERRUPTED
                if tool is None or (tool.metadata or {}).get("retry_safe", True)
                else NOT_RERUN.format(tool=tool.name)
            )
            return {"messages": [error_result(call, text)]}
        if not_released:
            emit("refused a tool call check did not release", ids, "refused", logging.WARNING)
            return {"messages": [error_result(call, not_released)]}
        if tool is None:  # checked under another tool list, resumed under this one
            emit("refused a tool call", ids, "refused", logging.WARNING)
            text = guards.unknown_tool(call["name"], list(self.tools_by_name))
            return {"messages": [error_result(call, text)]}
        if started_before(tool, call, config):
            text = NOT_RERUN.format(tool=tool.name)
            return {"messages": [error_result(call, text)]}
        with self._slots:
            timeout = min(self.settings.tool_timeout_s, seconds_left(self.settings, runtime))
            emit("tool call started", ids, "tool_start")
            started = time.monotonic()
            handed = with_tool_settings(config, self.tool_settings)
            with tracing.tool_call(runtime.context, ids) as span:
                try:
                    output = run_call(
                        self.tool_node, tool, call, handed, timeout, self.settings.tool_timeout_s
                    )
                except GraphBubbleUp:  # the tool called interrupt(): it runs again when resumed
                    forget_start(tool, call, config)
                    raise
                duration_ms = round((time.monotonic() - started) * 1000)
                updates, status = results_of(output, call, duration_ms)
                tracing.describe_result(span, status)
        emit("tool call finished", ids, "tool_end", duration_ms=duration_ms, ferry_status=status)
        if status == "error" or task["failures"]:  # a success only matters after failures
            updates.append({"tool_failures": {call["name"]: status == "success"}})
        return node_output(updates)


def _answered_in_words(
    reply: AIMessage, answer: output.ResponseFormat, ids: dict[str, Any]
) -> dict[str, Any]:
    """A reply in words where an answer in the schema was asked for.

    JSON text that matches is taken as the answer (models that ignore `tool_choice` write it
    so); anything else ends the turn in those words, `invalid_output`.
    """
    try:
        value = answer.answer_in(reply.text)
    except output.InvalidAnswer:
        emit("answer in words, not in the schema", ids, "invalid_output", logging.WARNING)
        return {"stop_reason": "invalid_output"}
    emit("structured answer", ids, "structured_output")
    return {"stop_reason": "answered", "structured_response": value}


def _with_memories(prompt: list[BaseMessage], offered: list[memory.Memory]) -> list[BaseMessage]:
    """The prompt with the memories offered just before the turn's question.

    There, the prefix before the question stays the same from call to call (providers' prompt
    caches hold). The reply records which were offered (`OFFERED`): the outbound rule reads them
    from the thread, for the rest of it, as it reads a private tool's results.
    """
    if not offered:
        return prompt
    at = max(i for i, m in enumerate(prompt) if isinstance(m, HumanMessage))
    note = HumanMessage(memory.as_note(offered), id="ferry-memories")
    return [*prompt[:at], note, *prompt[at:]]


def offered_memories(messages: Sequence[AnyMessage]) -> list[str]:
    """The memories the thread's model was offered so far, as private sources are named."""
    found: dict[str, None] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for memory_id in message.response_metadata.get(OFFERED) or []:
                found[f"memory ({memory_id})"] = None
    return list(found)

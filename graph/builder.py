"""Assemble the graph: call_model → check → execute_tool (one task per call) → call_model."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import convert_to_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StateUpdate

from graph.nodes import AgentNodes, RunContext
from graph.provenance import refuse_client_results, tool_results_in
from graph.routing import route_after_check
from graph.settings import Settings, get_settings
from graph.state import FerryState

log = logging.getLogger("ferry.loop")


class FerryGraph(CompiledStateGraph[FerryState, RunContext, FerryState, FerryState]):
    """The compiled graph; each invocation gets a fresh `RunContext` unless one is passed.

    The time budget is per invocation, so every `invoke`/`stream` (Python, CLI or server) needs
    to know when it started, without callers having to pass anything. Every write a client
    makes (run input, `Command.update`, `update_state`) is checked first: it may not supply the
    result of a call Ferry issued (graph/provenance.py). `invoke` runs through `stream` and
    `ainvoke` through `astream`, and so does the server (`astream`, `astream_events`); the
    `update_state` family runs through `bulk_update_state`.
    """

    def stream(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 - Pregel.stream's own doc
        args, kwargs = _prepared(args, kwargs)
        graph_input, config = _input_and_config(args, kwargs)
        results = tool_results_in(graph_input)
        if (results or isinstance(graph_input, dict)) and self._stores(config):
            state = self.get_state(config)
            refuse_client_results(results, state)
            if isinstance(graph_input, dict):
                self._keep_finished_results(config, state)
        if (graph_input is None or isinstance(graph_input, Command)) and config:
            thread_id = config.get("configurable", {}).get("thread_id")
            extra = {"event": "resume", "thread_id": thread_id, "run_id": kwargs["context"].run_id}
            log.info("resuming the run from its last checkpoint", extra=extra)
        return super().stream(*args, **kwargs)

    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # noqa: D102
        args, kwargs = _prepared(args, kwargs)
        graph_input, config = _input_and_config(args, kwargs)
        results = tool_results_in(graph_input)
        if results and self._stores(config):
            refuse_client_results(results, await self.aget_state(config))
        # Pregel.astream is an async generator: closing it closes the run when a client leaves.
        inner = cast(AsyncGenerator[Any, None], super().astream(*args, **kwargs))
        async with aclosing(inner) as stream:
            async for part in stream:
                yield part

    def bulk_update_state(  # noqa: D102 - Pregel.bulk_update_state's own doc
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        results = [r for step in supersteps for update in step for r in tool_results_in(update[0])]
        if results:
            refuse_client_results(results, self.get_state(config))
        return super().bulk_update_state(config, supersteps)

    async def abulk_update_state(  # noqa: D102 - Pregel.abulk_update_state's own doc
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        results = [r for step in supersteps for update in step for r in tool_results_in(update[0])]
        if results:
            refuse_client_results(results, await self.aget_state(config))
        return await super().abulk_update_state(config, supersteps)

    def _stores(self, config: RunnableConfig | None) -> bool:
        """Whether this run reads and writes a stored thread (a saver and a thread id)."""
        thread_id = (config or {}).get("configurable", {}).get("thread_id")
        return isinstance(self.checkpointer, BaseCheckpointSaver) and thread_id is not None

    def _keep_finished_results(self, config: RunnableConfig, state: StateSnapshot) -> None:
        """Store the results of calls that finished before a run died, ahead of new input.

        New input starts a fresh step, and LangGraph drops the unfinished step's saved results
        with it; the calls would then be answered "no result" although they ran.
        """
        finished = [
            message
            for task in state.tasks
            if task.name == "execute_tool" and isinstance(task.result, dict)
            for message in task.result.get("messages", [])
        ]
        if finished:  # Ferry's own results: stored past the client-write check
            update = StateUpdate({"messages": finished}, "execute_tool", None)
            super().bulk_update_state(config, [[update]])


def _input_and_config(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A run's input and config, however they were passed."""
    graph_input = args[0] if args else kwargs.get("input")
    return graph_input, args[1] if len(args) > 1 else kwargs.get("config")


def _prepared(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
    """A run's arguments: a fresh `RunContext`, durable steps, and ids on the new messages.

    The input is stored as given and replayed whenever the thread is read; with ids assigned
    here, every replay yields the same messages without converting them again.
    """
    kwargs = {**kwargs, "context": kwargs.get("context") or RunContext()}
    # Save each step before the next starts: a crash mid-tool must find the model's reply (and
    # its tool call ids) stored, or the resumed run would ask the model again and could repeat
    # a side effect under a new id.
    kwargs["durability"] = kwargs.get("durability") or "sync"
    graph_input = args[0] if args else kwargs.get("input")
    if isinstance(graph_input, dict) and graph_input.get("messages"):
        given = graph_input["messages"]
        messages = convert_to_messages(given if isinstance(given, list) else [given])
        graph_input = {
            **graph_input,
            "messages": [
                m if m.id else m.model_copy(update={"id": str(uuid.uuid4())}) for m in messages
            ],
        }
        if args:
            args = (graph_input, *args[1:])
        else:
            kwargs["input"] = graph_input
    return args, kwargs


def _compile(
    settings: Settings,
    model: BaseChatModel | None,
    tools: list[BaseTool] | None,
    checkpointer: BaseCheckpointSaver[Any] | None,
) -> FerryGraph:
    if tools is None:
        from tools import TOOLS

        tools = TOOLS
    from graph.storage import RecordsStarts

    first_start = checkpointer.first_start if isinstance(checkpointer, RecordsStarts) else None
    nodes = AgentNodes(settings=settings, tools=list(tools), model=model, first_start=first_start)
    builder = StateGraph(FerryState, context_schema=RunContext)
    builder.add_node("call_model", nodes.call_model)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    builder.add_node("check", nodes.check)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    builder.add_node("execute_tool", nodes.execute_tool)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    builder.add_edge(START, "call_model")
    builder.add_edge("call_model", "check")
    builder.add_conditional_edges("check", route_after_check, ["execute_tool", "call_model", END])
    builder.add_edge("execute_tool", "call_model")
    compiled = builder.compile(checkpointer=checkpointer, name="ferry")
    compiled.__class__ = FerryGraph  # adds only the methods above; no new state
    return compiled  # type: ignore[return-value]  # the class was just swapped


def build_graph(
    *,
    model: BaseChatModel | None = None,
    tools: list[BaseTool] | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    settings: Settings | None = None,
) -> FerryGraph:
    """Build Ferry's compiled graph.

    Args:
        model: The chat model; by default the one `FERRY_MODEL` names, created on first use.
        tools: The tools; by default `tools.TOOLS`.
        checkpointer: Where threads are stored; by default Postgres at `FERRY_DATABASE_URL`
            when it is set, else SQLite at `FERRY_DB`.
        settings: Ferry's settings; by default read from the environment and `.env`.
    """
    settings = settings or get_settings()
    if checkpointer is None:
        from graph.storage import default_saver

        checkpointer = default_saver(settings)
    return _compile(settings, model, tools, checkpointer)


def _server_graph() -> FerryGraph:
    """The graph for `langgraph.json`: no checkpointer, the server supplies persistence."""
    return _compile(get_settings(), None, None, None)


graph = _server_graph()

"""Assemble the graph: call_model → check → execute_tool (one task per call) → call_model."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Command, StateUpdate

from graph import output, tracing
from graph.core.settings import ConfigError, Settings, get_settings
from graph.lifecycle import route_after_check
from graph.nodes import AgentNodes, RunContext
from graph.provenance import admit_run, admit_updates
from graph.state import FerryInput, FerryOutput, FerryState, fold_messages
from graph.threads.lease import aleased, leased, remember_settings

log = logging.getLogger("ferry.loop")


class FerryGraph(CompiledStateGraph[FerryState, RunContext, FerryInput, FerryOutput]):
    """The compiled graph; each invocation gets a fresh `RunContext` unless one is passed.

    The time budget is per invocation, so every `invoke`/`stream` (Python, CLI or server) needs
    to know when it started, without callers having to pass anything. Every write a client
    makes passes one gate first (graph/provenance.py): a run's input and commands
    through `admit_run`, state updates through `admit_updates`. `invoke` runs through
    `stream` and `ainvoke` through `astream`, and so does the server (`astream`,
    `astream_events`); the `update_state` family runs through `bulk_update_state`, and so do
    the server's state updates and `supersteps`.
    """

    @leased  # one run per thread at a time, from the checks below to the run's last step
    def stream(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 - Pregel.stream's own doc
        args, kwargs = _prepared(args, kwargs)
        graph_input, config = _input_and_config(args, kwargs)
        stored = self.get_state(config) if self._stores(config) else None
        behind = _names_checkpoint(config, stored) and self._behind_head(config, stored)
        admitted = admit_run(graph_input, stored, _ids(config, kwargs), behind_head=behind)
        if admitted.store_first:  # Ferry's own writes: stored past the gate
            super().bulk_update_state(config, [admitted.store_first])
        _log_resume(graph_input, config, kwargs)
        args, kwargs = _with_input(args, kwargs, admitted.graph_input)
        invocation = tracing.Invocation(kwargs["context"], admitted.graph_input, stored, config)
        return tracing.traced(super().stream(*args, **kwargs), invocation)

    @aleased
    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # noqa: D102
        args, kwargs = _prepared(args, kwargs)
        graph_input, config = _input_and_config(args, kwargs)
        stored = await self.aget_state(config) if self._stores(config) else None
        behind = _names_checkpoint(config, stored) and await self._abehind_head(config, stored)
        admitted = admit_run(graph_input, stored, _ids(config, kwargs), behind_head=behind)
        if admitted.store_first:
            await super().abulk_update_state(config, [admitted.store_first])
        _log_resume(graph_input, config, kwargs)
        args, kwargs = _with_input(args, kwargs, admitted.graph_input)
        # Pregel.astream is an async generator: closing it closes the run when a client leaves.
        inner = cast(AsyncGenerator[Any, None], super().astream(*args, **kwargs))
        invocation = tracing.Invocation(kwargs["context"], admitted.graph_input, stored, config)
        inner = tracing.atraced(inner, invocation)
        async with aclosing(inner) as stream:
            async for part in stream:
                yield part

    def bulk_update_state(  # noqa: D102 - Pregel.bulk_update_state's own doc
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        admitted = admit_updates(supersteps, self.get_state(config))
        return super().bulk_update_state(config, admitted)

    async def abulk_update_state(  # noqa: D102 - Pregel.abulk_update_state's own doc
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        admitted = admit_updates(supersteps, await self.aget_state(config))
        return await super().abulk_update_state(config, admitted)

    def _behind_head(self, config: RunnableConfig, stored: Any) -> bool:
        """Whether `stored` is a checkpoint the thread has gone on from (the head's id only)."""
        head = cast(BaseCheckpointSaver[Any], self.checkpointer).get_tuple(_head(config))
        return _checkpoint_id(head) != _checkpoint_id(stored)

    async def _abehind_head(self, config: RunnableConfig, stored: Any) -> bool:
        saver = cast(BaseCheckpointSaver[Any], self.checkpointer)
        return _checkpoint_id(await saver.aget_tuple(_head(config))) != _checkpoint_id(stored)

    def _stores(self, config: RunnableConfig | None) -> bool:
        """Whether this run reads and writes a stored thread (a saver and a thread id)."""
        thread_id = (config or {}).get("configurable", {}).get("thread_id")
        return isinstance(self.checkpointer, BaseCheckpointSaver) and thread_id is not None


def _names_checkpoint(config: RunnableConfig, stored: Any) -> bool:
    """Whether a run starts from a checkpoint its config names (perhaps a replay)."""
    named = (config or {}).get("configurable", {}).get("checkpoint_id")
    return bool(named and stored)


def _head(config: RunnableConfig) -> RunnableConfig:
    """`config` addressing its thread's latest checkpoint."""
    configurable = {k: v for k, v in config["configurable"].items() if k != "checkpoint_id"}
    return {**config, "configurable": configurable}


def _checkpoint_id(state: Any) -> str | None:
    """The id of a snapshot's or a checkpoint tuple's checkpoint."""
    checkpoint_id = (
        (getattr(state, "config", None) or {}).get("configurable", {}).get("checkpoint_id")
    )
    return str(checkpoint_id) if checkpoint_id else None


def _ids(config: RunnableConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The thread and run ids a log line about this run carries."""
    thread_id = (config or {}).get("configurable", {}).get("thread_id")
    return {"thread_id": thread_id, "run_id": kwargs["context"].run_id}


def _log_resume(graph_input: Any, config: RunnableConfig | None, kwargs: dict[str, Any]) -> None:
    if (graph_input is None or isinstance(graph_input, Command)) and config:
        thread_id = config.get("configurable", {}).get("thread_id")
        extra = {"event": "resume", "thread_id": thread_id, "run_id": kwargs["context"].run_id}
        log.info("resuming the run from its last checkpoint", extra=extra)


def _with_input(
    args: tuple[Any, ...], kwargs: dict[str, Any], graph_input: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The run's arguments with `graph_input` in place of the input given."""
    if args:
        return (graph_input, *args[1:]), kwargs
    return args, {**kwargs, "input": graph_input}


def _input_and_config(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A run's input and config, however they were passed."""
    graph_input = args[0] if args else kwargs.get("input")
    return graph_input, args[1] if len(args) > 1 else kwargs.get("config")


def _prepared(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
    """A run's arguments: a fresh `RunContext` and durable steps, its answer schema checked.

    (The new messages get their ids from the gate, `admit_run`, which rebuilds them.)
    """
    _, config = _input_and_config(args, kwargs)
    output.of_run(config, None)  # a run's answer schema that cannot work fails before it stores
    context = kwargs.get("context")
    if not isinstance(context, RunContext):
        # The server passes the run's `configurable` as context, a dict nothing coerces (the
        # graph declares no context schema); the server's run id then names the invocation.
        run_id = (config or {}).get("run_id")
        context = RunContext(run_id=str(run_id)) if run_id else RunContext()
    kwargs = {**kwargs, "context": context}
    # Save each step before the next starts: a crash mid-tool must find the model's reply (and
    # its tool call ids) stored, or the resumed run would ask the model again and could repeat
    # a side effect under a new id. Whatever the caller asks: the server passes its own default
    # ("async"), which saves a step while the next one already runs.
    kwargs.pop("checkpoint_during", None)  # the deprecated spelling of durability
    kwargs["durability"] = "sync"
    return args, kwargs


def _compile(
    settings: Settings,
    model: BaseChatModel | None,
    tools: list[BaseTool] | None,
    checkpointer: BaseCheckpointSaver[Any] | None,
    store: BaseStore | None,
    *,
    memory: bool,
    response_format: Any = None,
) -> FerryGraph:
    if tools is None:
        tools = default_tools(settings)
        if memory:  # the tools that need a store, where there is one
            from tools.memory import recall, remember

            tools = [*tools, remember, recall]
    unknown = sorted(settings.approval_required - {t.name for t in tools})
    if unknown:  # a typo would silently remove the approval step
        raise ConfigError(
            f"FERRY_APPROVE_TOOLS names {', '.join(map(repr, unknown))}, which is not a tool; "
            f"the tools are {', '.join(t.name for t in tools)} (yours: --tools or FERRY_TOOLS)"
        )
    answer = output.response_format(response_format) if response_format is not None else None
    nodes = AgentNodes(settings=settings, tools=list(tools), model=model, response_format=answer)

    # No context schema: a `RunContext` is made for every invocation (`_prepared`), and its id
    # and clock are not settings; declared, Studio would offer `run_id` as one.
    builder = StateGraph[FerryState, RunContext, FerryInput, FerryOutput](
        FerryState, input_schema=FerryInput, output_schema=FerryOutput
    )
    builder.add_node("call_model", nodes.call_model)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    builder.add_node("check", nodes.check)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    # Its input is a ToolTask sent by `route_after_check`; naming the state as its schema keeps the
    # task's keys from becoming channels of every thread (and fields of Studio's state schema).
    builder.add_node("execute_tool", nodes.execute_tool, input_schema=FerryState)  # type: ignore[call-overload]  # LangGraph's node protocols do not spell out (state, config, runtime)
    builder.add_edge(START, "call_model")
    builder.add_edge("call_model", "check")
    builder.add_conditional_edges("check", route_after_check, ["execute_tool", "call_model", END])
    builder.add_edge("execute_tool", "call_model")
    compiled = builder.compile(checkpointer=checkpointer, store=store, name="ferry")
    compiled.__class__ = FerryGraph  # adds only the methods above; no new state
    remember_settings(compiled, settings)
    return compiled  # type: ignore[return-value]  # the class was just swapped


def default_tools(settings: Settings) -> list[BaseTool]:
    """Ferry's own tools, yours (`FERRY_TOOLS`), then the MCP servers' (`FERRY_MCP_CONFIG`)."""
    from tools import TOOLS
    from tools.mcp import McpConfigError, mcp_tools

    yours = user_tools(settings)
    taken = [t.name for t in [*TOOLS, *yours]]
    try:
        return [*TOOLS, *yours, *mcp_tools(settings.mcp_config, reserved=taken)]  # renamed if taken
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from exc


def user_tools(settings: Settings, option: str = "FERRY_TOOLS") -> list[BaseTool]:
    """The tools `FERRY_TOOLS` names (`module:ATTR`, comma-separated); none by default.

    `option` is what the error line names as their source (`--tools` on the command line).
    """
    from tools.user_tools import UserToolsError, load_user_tools, tool_specs

    specs = tool_specs(settings.tools)
    if not specs:
        return []
    from tools import TOOLS
    from tools.memory import recall, remember

    reserved = frozenset(t.name for t in [*TOOLS, remember, recall])
    try:
        return list(load_user_tools(specs, reserved))
    except UserToolsError as exc:
        raise ConfigError(f"{option} {exc}") from None


def build_graph(
    *,
    model: BaseChatModel | None = None,
    tools: list[BaseTool] | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    settings: Settings | None = None,
    store: BaseStore | None = None,
    response_format: Any = None,
) -> FerryGraph:
    """Build Ferry's compiled graph.

    Args:
        model: The chat model; by default the one `FERRY_MODEL` names, created on first use.
        tools: The tools; by default `tools.TOOLS` and the tools of the MCP servers in
            `FERRY_MCP_CONFIG` (or `./mcp.json`), started once per process.
        checkpointer: Where threads are stored, used as given (a Ferry saver opened without
            a reducer is handed Ferry's); by default Postgres at `FERRY_DATABASE_URL` when
            it is set, else SQLite at `FERRY_DB`.
        settings: Ferry's settings; by default read from the environment and `.env`.
        store: The long-term memory store (`remember` and `recall`, offered with the default
            tools when there is one); by default LangGraph's store in the same database as
            the default checkpointer, and none beside a checkpointer passed in.
        response_format: The schema every turn's final answer must match: a pydantic model,
            a TypedDict, a dataclass or a JSON schema. The answer is validated and returned
            (and stored) as plain JSON in `structured_response`; a run may send its own JSON
            schema as `configurable["response_format"]` instead.
    """
    settings = settings or get_settings()
    if checkpointer is None:
        from graph.storage import default_saver
        from graph.storage.stores import default_store

        checkpointer = default_saver(settings, fold=fold_messages)
        store = store or default_store(settings.db, settings.database_url)
    else:  # the caller's, used as given (a stock SQLite saver's cost logged once)
        from graph.storage import given_saver

        checkpointer = given_saver(checkpointer, fold=fold_messages)
    return _compile(
        settings,
        model,
        tools,
        checkpointer,
        store,
        memory=store is not None,
        response_format=response_format,
    )


@functools.cache
def served_graph() -> FerryGraph:
    """The graph for `langgraph.json`: the server supplies the checkpointer and the store."""
    return _compile(get_settings(), None, None, None, None, memory=True)


def __getattr__(name: str) -> FerryGraph:
    # `graph` is built on first use: it starts the MCP servers configured, which commands that
    # only import this module (`ferry history`, `ferry threads`) must not do.
    if name == "graph":
        return served_graph()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

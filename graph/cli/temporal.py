"""`ferry worker`, `ferry cancel`, and `ask`/`chat`/`resume` handing their turns to Temporal.

With `FERRY_TEMPORAL_ADDRESS` set (or `--temporal ADDRESS`), a turn runs on whichever `ferry
worker` takes it (graph/temporal). The command prints what it prints in-process: progress lines
on stderr, the answer on stdout (whole, once the turn ends: tokens are not streamed through
Temporal), the same `--json` object and exit codes. Leaving (Ctrl-C, a kill) leaves the turn
running; `ferry resume --thread ID` watches it again and `ferry cancel --thread ID` stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import json
import sys
from collections.abc import Callable, Coroutine
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from graph.cli.agent import (
    UserError,
    existing_state,
    has_unfinished_run,
    open_graph,
    pick_thread,
    print_json,
    question_of,
    resume_all,
)
from graph.controls import printable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from temporalio.client import Client, WorkflowHandle
    from temporalio.runtime import Runtime

    from graph.builder import FerryGraph
    from graph.settings import Settings

T = TypeVar("T")


def add_temporal_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ferry worker` and `ferry cancel`, and `--temporal` to ask, chat and resume."""
    help_address = "Temporal frontend host:port, overriding FERRY_TEMPORAL_ADDRESS"
    for name, on_temporal_handler in HOOKS.items():
        parser = sub.choices[name]
        parser.add_argument("--temporal", metavar="ADDRESS", help=help_address)
        in_process = parser.get_default("handler")
        parser.set_defaults(handler=_routed(in_process, on_temporal_handler))
    worker = sub.add_parser(
        "worker",
        help="Run Ferry's turns for Temporal (start any number, on any hosts).",
        description="Serve Ferry's turns from Temporal's task queue (FERRY_TEMPORAL_TASK_QUEUE).",
    )
    worker.set_defaults(handler=cmd_worker)
    cancel = sub.add_parser(
        "cancel",
        help="Stop the turn a thread runs on Temporal.",
        description="Stop the turn a thread runs on Temporal; the thread stays resumable.",
    )
    cancel.add_argument("--thread", required=True, help="the thread id")
    cancel.set_defaults(handler=cmd_cancel)
    for command in (worker, cancel):
        command.add_argument("--temporal", metavar="ADDRESS", help=help_address)


Handler = Callable[[argparse.Namespace], int]


def _routed(in_process: Handler, on_temporal_handler: Handler) -> Handler:
    """A command's handler that hands the turn to Temporal when an address is configured."""

    def handler(args: argparse.Namespace) -> int:
        return (on_temporal_handler if on_temporal(args) else in_process)(args)

    handler.__doc__ = in_process.__doc__
    return handler


def on_temporal(args: argparse.Namespace) -> bool:
    """Whether this command's turns go to Temporal (`--temporal` or FERRY_TEMPORAL_ADDRESS)."""
    from graph.settings import get_settings

    return bool(getattr(args, "temporal", None) or get_settings().temporal_address)


def _settings(args: argparse.Namespace) -> Settings:
    from graph.log import configure_logging
    from graph.settings import get_settings

    settings = get_settings()
    if getattr(args, "temporal", None):
        settings = settings.model_copy(update={"temporal_address": args.temporal})
    configure_logging(settings)
    return settings


_RUNTIME: contextvars.ContextVar[Runtime] = contextvars.ContextVar("ferry_temporal_runtime")


def _run(coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run one command's Temporal work on a runtime of its own, dropped before the process ends.

    The SDK's process-wide runtime outlives the interpreter's shutdown, and its threads then
    sometimes abort the process (temporalio/sdk-python#300: "PyGILState_Release", exit 134
    after the answer was printed). A runtime released while Python still runs does not.
    """
    from temporalio.runtime import Runtime, TelemetryConfig

    runtime = Runtime(telemetry=TelemetryConfig())
    token = _RUNTIME.set(runtime)
    try:
        return asyncio.run(coroutine())
    except BaseException as exc:
        _forget_frames(exc)  # the frames hold the client, and the client its runtime
        raise
    finally:
        _RUNTIME.reset(token)
        del runtime
        gc.collect()


def _forget_frames(exc: BaseException | None) -> None:
    while exc is not None:
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


async def _client(settings: Settings) -> Client:
    from graph.temporal import connect

    return await connect(settings, runtime=_RUNTIME.get())


def cmd_worker(args: argparse.Namespace) -> int:
    """Serve Ferry's turns until stopped (Ctrl-C or SIGTERM); its running steps go elsewhere."""
    from graph.temporal.client import DEFAULT_ADDRESS
    from graph.temporal.worker import serve

    settings = _settings(args)
    address = settings.temporal_address or DEFAULT_ADDRESS
    line = (
        f"ferry worker: serving task queue {settings.temporal_task_queue} at {address} "
        f"(namespace {settings.temporal_namespace}); Ctrl-C to stop"
    )
    chosen = settings.model_copy(update={"temporal_address": address})
    _run(lambda: serve(chosen, lambda: _line(line), _RUNTIME.get()))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel the thread's turn on Temporal and wait until it stopped."""
    from graph.temporal import cancel
    from graph.temporal.shapes import workflow_id

    settings = _settings(args)

    async def stop() -> bool:
        client = await _client(settings)
        if not await cancel(client, args.thread):
            return False
        handle = client.get_workflow_handle(workflow_id(args.thread))
        try:
            await handle.result()
        except Exception:  # noqa: BLE001 - cancelled is the outcome asked for
            pass
        return True

    if not _run(stop):
        raise UserError(f"thread {args.thread} has no turn running on Temporal")
    sys.stderr.write(
        f"thread {args.thread}: its Temporal run is cancelled; "
        f"continue it with: ferry resume --thread {args.thread}\n"
    )
    return 0


@contextmanager
def _thread_graph(args: argparse.Namespace) -> Iterator[FerryGraph]:
    """The graph on the configured database, only to read threads (no model, no tools)."""
    with open_graph(args, need_model=False) as graph:
        yield graph


def _line(line: str) -> None:
    sys.stderr.write(printable(line) + "\n")
    sys.stderr.flush()


def _show(report: dict[str, Any], as_json: bool, thread_id: str) -> int:
    """Print a turn's outcome as `run_to_stop` does in-process; the exit code."""
    if as_json:
        print_json(report)
        return 0
    if report.get("answer"):
        sys.stdout.write(printable(report["answer"]) + "\n")
        sys.stdout.flush()
    for call in report.get("pending_approvals") or []:
        _line(f"awaiting approval: {call['name']}({json.dumps(call['args'])})")
    if report.get("pending_approvals"):
        _line(f"decide with: ferry resume --thread {thread_id} --approve (or --reject REASON)")
    return 0


async def _watch_deciding(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    thread_id: str,
    interactive: bool,
    graph: FerryGraph,
) -> dict[str, Any]:
    """Watch the turn; at a pause, ask the person at the terminal (when there is one)."""
    from graph.cli.approvals import ask_decisions
    from graph.cli.render import pending_approvals_of
    from graph.temporal import decide, watch

    while True:
        report = await watch(handle, _line)
        if not (interactive and report.get("pending_approvals")):
            return report
        pending = pending_approvals_of(existing_state(graph, thread_id))
        decided = await decide(client, thread_id, ask_decisions(pending))
        if decided is None:
            return report


async def _start(
    client: Client, thread_id: str, question: str | None, args: argparse.Namespace, **turn: Any
) -> WorkflowHandle[Any, Any]:
    """Start the turn; with `--wait`, after the turn running on the thread ends."""
    from graph.temporal import TurnRunning, running_turn, start_turn

    while True:
        try:
            return await start_turn(client, thread_id, question, model=args.model, **turn)
        except TurnRunning:
            running = await running_turn(client, thread_id)
            if not getattr(args, "wait", False) or running is None:
                raise
            _line(f"thread {thread_id} is busy on Temporal; waiting for its turn to end")
            try:
                await running.result()
            except Exception:  # noqa: BLE001 - however it ended, the thread is free
                pass


def ask(args: argparse.Namespace) -> int:
    """`ferry ask` on Temporal."""
    settings = _settings(args)
    question = question_of(args)
    with _thread_graph(args) as graph:
        note = pick_thread(graph, args)

        async def turn() -> dict[str, Any]:
            client = await _client(settings)
            handle = await _start(client, args.thread, question, args, settings=settings)
            if note:
                sys.stderr.write(note)
            interactive = not args.json and sys.stdin.isatty()
            return await _watch_deciding(client, handle, args.thread, interactive, graph)

        return _show(_run(turn), args.json, args.thread)


def chat(args: argparse.Namespace) -> int:
    """`ferry chat` on Temporal: each question a turn there; Ctrl-C leaves an answer running."""
    import uuid

    settings = _settings(args)
    with _thread_graph(args) as graph:
        if args.thread or args.continue_:
            pick_thread(graph, args)
        else:
            args.thread = str(uuid.uuid4())
        sys.stderr.write(f"thread: {args.thread}  (Ctrl-D to end)\n")
        args.wait = True  # a question after a Ctrl-C'd answer waits for that answer to end
        while True:
            try:
                question = input("you> ").strip()
            except (EOFError, KeyboardInterrupt):
                sys.stderr.write("\n")
                return 0
            if question in ("exit", "quit"):
                return 0
            if not question:
                continue

            async def turn(text: str = question) -> dict[str, Any]:
                client = await _client(settings)
                handle = await _start(client, args.thread, text, args, settings=settings)
                return await _watch_deciding(client, handle, args.thread, True, graph)

            try:
                _show(_run(turn), False, args.thread)
            except KeyboardInterrupt:
                _line(
                    f"\nferry: left the answer running on Temporal; see it with: "
                    f"ferry resume --thread {args.thread}"
                )


def resume(args: argparse.Namespace) -> int:
    """`ferry resume` on Temporal: re-attach to the running turn, decide, or continue the thread."""
    from graph.cli.render import pending_approvals_of
    from graph.temporal import decide, running_turn

    settings = _settings(args)
    with _thread_graph(args) as graph:
        state = existing_state(graph, args.thread)

        async def turn() -> dict[str, Any] | None:
            client = await _client(settings)
            handle = await running_turn(client, args.thread)
            if args.approve or args.reject is not None:
                pending = pending_approvals_of(state)
                if not pending:
                    raise UserError(f"thread {args.thread!r} has no tool calls awaiting approval")
                choice = (
                    {"type": "approve"}
                    if args.approve
                    else {"type": "reject", "message": args.reject}
                )
                value = resume_all(pending, choice)
                handle = await decide(client, args.thread, value)
                if handle is None:  # paused in-process, or its Temporal run was cancelled
                    handle = await _start(
                        client, args.thread, None, args, decision=value, settings=settings
                    )
            elif handle is None:
                if not has_unfinished_run(state):
                    return await _last_report(client, args.thread, state)
                handle = await _start(client, args.thread, None, args, settings=settings)
            interactive = not args.json and sys.stdin.isatty()
            return await _watch_deciding(client, handle, args.thread, interactive, graph)

        report = _run(turn)
        if report is None:
            return _nothing_to_resume(args, state)
        return _show(report, args.json, args.thread)


async def _last_report(client: Client, thread_id: str, state: Any) -> dict[str, Any] | None:
    """The report of the thread's last Temporal turn, if the thread ends with its answer.

    A client that left (Ctrl-C, killed) while its turn went on finds the answer here.
    """
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from graph.cli.render import answer_of
    from graph.temporal.shapes import ordered_report, workflow_id

    handle = client.get_workflow_handle(workflow_id(thread_id))
    try:
        described = await handle.describe()
    except RPCError:
        return None
    if described.status != WorkflowExecutionStatus.COMPLETED:
        return None
    report: dict[str, Any] = await handle.result()
    messages = (state.values or {}).get("messages") or []
    if report.get("answer") != answer_of(messages):
        return None  # the thread went on since
    return ordered_report(report)


def _nothing_to_resume(args: argparse.Namespace, state: Any) -> int:
    from graph.cli.render import RunSummary, json_report

    if args.json:
        stopped = {"stop_reason": state.values.get("stop_reason")}
        print_json({**json_report(args.thread, stopped, RunSummary()), "resumed": False})
    else:
        sys.stderr.write(f"thread {args.thread}: nothing to resume, its last run finished.\n")
    return 0


HOOKS: dict[str, Handler] = {
    "ask": ask,
    "chat": chat,
    "resume": resume,
}

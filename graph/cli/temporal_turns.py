"""`ask`, `chat` and `resume` on Temporal: the turn runs on a worker, the command watches it.

The command prints what it prints in-process (graph/cli/temporal.py says what differs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graph.cli.agent import (
    UserError,
    answer_schema,
    existing_state,
    has_unfinished_run,
    pick_thread,
    print_json,
    question_of,
    resume_all,
    schema_outcome,
    turn_schema,
)
from graph.cli.temporal_runtime import (
    client_of,
    run_on_temporal,
    say,
    server_wait,
    settings_of,
    thread_graph,
)
from graph.core.controls import printable

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from graph.builder import FerryGraph
    from graph.temporal.client import WaitForServer


class Replies:
    """A turn's progress lines on stderr and its model replies on stdout, each text once.

    A reply's text comes as it grows (the running step's heartbeats) and whole when its step
    ends, so what was printed is kept by reply: only text beyond it is printed.
    """

    def __init__(self) -> None:
        from graph.cli.render import Progress  # LangChain's: not for `ferry --help`

        self.progress = Progress()
        self._shown: dict[str, str] = {}
        self._last = ""

    def line(self, line: str) -> None:
        """A progress line, on a line of its own."""
        self.progress.note(line)

    def text(self, reply_id: str, text: str) -> None:
        """A reply's text so far: what was not printed yet of it is."""
        shown = self._shown.get(reply_id, "")
        if len(text) <= len(shown) or not text.startswith(shown):
            return  # nothing new: a heartbeat read after its step's whole text
        if reply_id != self._last:
            self.progress.end_answer()
            self._last = reply_id
        self.progress.token(text[len(shown) :])
        self._shown[reply_id] = text

    def printed(self, answer: str) -> bool:
        """Whether the last reply printed is `answer`."""
        return bool(answer) and self._shown.get(self._last) == answer


def _show(
    report: dict[str, Any],
    as_json: bool,
    thread_id: str,
    replies: Replies | None = None,
    schema: str | None = None,
) -> int:
    """Print a turn's outcome as `run_to_stop` does in-process; the exit code."""
    if as_json:
        print_json(report)
    if schema is not None:
        return schema_outcome(report, as_json)
    if as_json:
        return 0
    if report.get("answer") and not (replies and replies.printed(report["answer"])):
        sys.stdout.write(printable(report["answer"]) + "\n")
        sys.stdout.flush()
    for call in report.get("pending_approvals") or []:
        say(f"awaiting approval: {call['name']}({json.dumps(call['args'])})")
    if report.get("pending_approvals"):
        say(f"decide with: ferry resume --thread {thread_id} --approve (or --reject REASON)")
    return 0


async def _watch_deciding(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    thread_id: str,
    interactive: bool,
    graph: FerryGraph,
    replies: Replies | None,
    wait: WaitForServer,
) -> dict[str, Any]:
    """Watch the turn; at a pause, ask the person at the terminal (when there is one).

    A server that goes away is waited for as `wait` says, and the turn watched again.
    """
    from graph.cli.approvals import ask_decisions
    from graph.runs.report import pending_approvals_of
    from graph.temporal import decide, watch

    while True:
        on_line, on_text = (replies.line, replies.text) if replies else (say, None)
        report = await watch(handle, on_line, on_text, wait)
        if replies:
            replies.progress.end_answer()
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

    schema = getattr(args, "schema", None)
    stream = not getattr(args, "json", False) and schema is None  # only the answer is shown
    while True:
        try:
            return await start_turn(
                client,
                thread_id,
                question,
                model=args.model,
                stream=stream,
                response_format=schema,
                **turn,
            )
        except TurnRunning:
            running = await running_turn(client, thread_id)
            if not getattr(args, "wait", False) or running is None:
                raise
            say(f"thread {thread_id} is busy on Temporal; waiting for its turn to end")
            try:
                await running.result()
            except Exception:  # noqa: BLE001 - however it ended, the thread is free
                pass


def ask(args: argparse.Namespace) -> int:
    """`ferry ask` on Temporal."""
    args.schema = answer_schema(args)
    settings = settings_of(args)
    question = question_of(args)
    replies = None if args.json or args.schema else Replies()
    with thread_graph(args) as graph:
        note = pick_thread(graph, args)

        async def turn() -> dict[str, Any]:
            client = await client_of(settings)
            handle = await _start(client, args.thread, question, args, settings=settings)
            if note:
                sys.stderr.write(note)
            interactive = not args.json and sys.stdin.isatty()
            wait = server_wait(settings)
            return await _watch_deciding(
                client, handle, args.thread, interactive, graph, replies, wait
            )

        report = run_on_temporal(turn, settings)
        return _show(report, args.json, args.thread, replies, args.schema)


def chat(args: argparse.Namespace) -> int:
    """`ferry chat` on Temporal: each question a turn there; Ctrl-C leaves an answer running."""
    import uuid

    settings = settings_of(args)
    with thread_graph(args) as graph:
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

            replies = Replies()

            async def turn(text: str = question, replies: Replies = replies) -> dict[str, Any]:
                client = await client_of(settings)
                handle = await _start(client, args.thread, text, args, settings=settings)
                wait = server_wait(settings)
                return await _watch_deciding(
                    client, handle, args.thread, True, graph, replies, wait
                )

            try:
                _show(run_on_temporal(turn, settings), False, args.thread, replies)
            except KeyboardInterrupt:
                say(
                    f"\nferry: left the answer running on Temporal; see it with: "
                    f"ferry resume --thread {args.thread}"
                )


def resume(args: argparse.Namespace) -> int:
    """`ferry resume` on Temporal: re-attach to the running turn, decide, or continue the thread."""
    args.schema = answer_schema(args)
    from graph.runs.report import pending_approvals_of
    from graph.temporal import decide, running_turn

    settings = settings_of(args)
    with thread_graph(args) as graph:
        state = existing_state(graph, args.thread)
        args.schema = args.schema or turn_schema(state)
        replies = None if args.json or args.schema else Replies()

        async def turn() -> dict[str, Any] | None:
            client = await client_of(settings)
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
            wait = server_wait(settings)
            return await _watch_deciding(
                client, handle, args.thread, interactive, graph, replies, wait
            )

        report = run_on_temporal(turn, settings)
        if report is None:
            return _nothing_to_resume(args, state)
        return _show(report, args.json, args.thread, replies, args.schema)


async def _last_report(client: Client, thread_id: str, state: Any) -> dict[str, Any] | None:
    """The report of the thread's last Temporal turn, if the thread ends with its answer.

    A client that left (Ctrl-C, killed) while its turn went on finds the answer here.
    """
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    from graph.runs.report import answer_of
    from graph.temporal.shapes import ordered_report, workflow_id

    handle = client.get_workflow_handle(workflow_id(thread_id))
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:  # the thread never ran on Temporal
            return None
        raise
    if described.status != WorkflowExecutionStatus.COMPLETED:
        return None
    report: dict[str, Any] = await handle.result()
    messages = (state.values or {}).get("messages") or []
    if report.get("answer") != answer_of(messages):
        return None  # the thread went on since
    return ordered_report(report)


def _nothing_to_resume(args: argparse.Namespace, state: Any) -> int:
    from graph.runs.report import nothing_done

    if args.json:
        print_json(nothing_done(args.thread, state))
    else:
        sys.stderr.write(f"thread {args.thread}: nothing to resume, its last run finished.\n")
    return 0


HOOKS: dict[str, Callable[[argparse.Namespace], int]] = {
    "ask": ask,
    "chat": chat,
    "resume": resume,
}

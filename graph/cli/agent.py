"""The `ferry` commands that run the agent: ask, chat and resume (with approvals).

Heavy imports stay inside the functions, so the CLI's start-up (and `--help`) stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from graph.cli.terminal import printable

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from graph.builder import FerryGraph
    from graph.settings import Settings


class UserError(Exception):
    """A problem the user can fix; printed as one line, exit code 1."""


def print_json(value: Any) -> None:
    """Print one JSON object on stdout: all that `--json` prints there."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")


@contextmanager
def open_graph(args: argparse.Namespace, *, need_model: bool) -> Iterator[FerryGraph]:
    """The graph on the configured database for one command; the model checked up front."""
    from graph.builder import build_graph
    from graph.log import configure_logging
    from graph.models import make_model
    from graph.settings import get_settings
    from graph.storage import open_saver

    settings: Settings = get_settings()
    if getattr(args, "model", None):
        settings = settings.model_copy(update={"model": args.model})
    configure_logging(settings)
    model = make_model(settings.model) if need_model else None
    with open_saver(settings) as saver:
        yield build_graph(model=model, checkpointer=saver, settings=settings)


def thread_config(thread_id: str) -> RunnableConfig:
    """The run configuration naming a thread."""
    return {"configurable": {"thread_id": thread_id}}


def existing_state(graph: FerryGraph, thread_id: str) -> Any:
    """The thread's latest state; a one-line error if it was never stored."""
    state = graph.get_state(thread_config(thread_id))
    if not state.values and state.created_at is None:
        raise UserError(f"unknown thread {thread_id!r} (see `ferry threads`)")
    return state


def ask_decisions(pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the person at the terminal to approve, edit or reject each pending call."""
    decisions: dict[str, Any] = {}
    for call in pending:
        shown = f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
        if call.get("description"):  # why a guard held it
            sys.stderr.write(printable(call["description"]) + "\n")
        while True:
            question = printable(f"approve {shown}? [a]pprove / [e]dit / [r]eject: ")
            choice = input(question).strip().lower()
            if choice.startswith("a"):
                decisions[call["id"]] = {"action": "approve"}
            elif choice.startswith("r"):
                reason = input("reason: ").strip()
                decisions[call["id"]] = {"action": "reject", "reason": reason}
            elif choice.startswith("e"):
                try:
                    args = json.loads(input("new arguments (JSON object): "))
                except json.JSONDecodeError as exc:
                    sys.stderr.write(f"not JSON: {exc}\n")
                    continue
                if not isinstance(args, dict):
                    sys.stderr.write("arguments must be a JSON object\n")
                    continue
                decisions[call["id"]] = {"action": "edit", "args": args}
            else:
                continue
            break
    return decisions


def run_to_stop(graph: FerryGraph, graph_input: Any, thread_id: str, as_json: bool) -> int:
    """Run to the answer, a guard's stop, or a pause for approval, and report it."""
    from langgraph.types import Command

    from graph.cli.render import Progress, RunSummary, json_report, pending_approvals_of, stream_run
    from graph.nodes import CAN_APPROVE

    config = thread_config(thread_id)
    progress = Progress(out=None if as_json else sys.stdout)
    summary = RunSummary()
    interactive = not as_json and sys.stdin.isatty()
    # A decision passed with the command is a person's; otherwise only a terminal can give one.
    config["configurable"][CAN_APPROVE] = interactive or isinstance(graph_input, Command)
    while True:
        stream_run(graph, graph_input, config, progress, summary)
        state = graph.get_state(config)
        pending = pending_approvals_of(state)
        if not (pending and interactive):
            break
        graph_input = Command(resume=ask_decisions(pending))
    if as_json:
        print_json(json_report(thread_id, state.values, summary, pending))
    elif pending:
        for call in pending:
            line = f"awaiting approval: {call['name']}({json.dumps(call['args'])})"
            sys.stderr.write(printable(line) + "\n")
        sys.stderr.write(
            f"decide with: ferry resume --thread {thread_id} --approve (or --reject REASON)\n"
        )
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Ask one question: a new turn on a new or given thread."""
    new_thread = not args.thread
    thread_id = args.thread = args.thread or str(uuid.uuid4())
    with open_graph(args, need_model=True) as graph:
        if new_thread and not args.json:
            sys.stderr.write(f"thread: {thread_id}\n")
        return run_to_stop(graph, {"messages": [("user", args.question)]}, thread_id, args.json)


def cmd_chat(args: argparse.Namespace) -> int:
    """Talk on one thread until end of input."""
    thread_id = args.thread = args.thread or str(uuid.uuid4())
    with open_graph(args, need_model=True) as graph:
        sys.stderr.write(f"thread: {thread_id}  (Ctrl-D to end)\n")
        while True:
            try:
                question = input("you> ").strip()
            except EOFError:
                sys.stderr.write("\n")
                return 0
            if question in ("exit", "quit"):
                return 0
            if question:
                run_to_stop(graph, {"messages": [("user", question)]}, thread_id, as_json=False)


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue an interrupted or crashed run from its last checkpoint."""
    from langgraph.types import Command

    from graph.cli.render import pending_approvals_of

    with open_graph(args, need_model=True) as graph:
        state = existing_state(graph, args.thread)
        if args.approve or args.reject is not None:
            if not pending_approvals_of(state):
                raise UserError(f"thread {args.thread!r} has no tool calls awaiting approval")
            decision = (
                {"action": "approve"}
                if args.approve
                else {"action": "reject", "reason": args.reject}
            )
            return run_to_stop(graph, Command(resume=decision), args.thread, args.json)
        if not state.next:
            if args.json:
                values = state.values
                print_json(
                    {
                        "thread_id": args.thread,
                        "answer": "",
                        "stop_reason": values.get("stop_reason"),
                        "model_calls": 0,
                        "tool_calls": [],
                        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
                        "resumed": False,
                    }
                )
            else:
                sys.stderr.write(
                    f"thread {args.thread}: nothing to resume, its last run finished.\n"
                )
            return 0
        return run_to_stop(graph, None, args.thread, args.json)

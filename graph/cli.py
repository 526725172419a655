"""`ferry`: ask, chat, resume, history and threads, all on the threads stored at `FERRY_DB`.

Only argparse is imported up front, so `ferry --help` is instant; the graph comes when needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from graph.builder import FerryGraph
    from graph.persistence import Saver
    from graph.settings import Settings


class UserError(Exception):
    """A problem the user can fix; printed as one line, exit code 1."""


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")


@contextmanager
def _open_graph(args: argparse.Namespace, *, need_model: bool) -> Iterator[FerryGraph]:
    from graph.builder import build_graph
    from graph.log import configure_logging
    from graph.models import make_model
    from graph.persistence import open_saver
    from graph.settings import get_settings

    settings: Settings = get_settings()
    if getattr(args, "model", None):
        settings = settings.model_copy(update={"model": args.model})
    configure_logging(settings)
    model = make_model(settings.model) if need_model else None
    with open_saver(settings) as saver:
        yield build_graph(model=model, checkpointer=saver, settings=settings)


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _existing_state(graph: FerryGraph, thread_id: str) -> Any:
    state = graph.get_state(_config(thread_id))
    if not state.values and state.created_at is None:
        raise UserError(f"unknown thread {thread_id!r} (see `ferry threads`)")
    return state


def _ask_decisions(pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the person at the terminal to approve, edit or reject each pending call."""
    decisions: dict[str, Any] = {}
    for call in pending:
        shown = f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
        while True:
            choice = input(f"approve {shown}? [a]pprove / [e]dit / [r]eject: ").strip().lower()
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


def _run(graph: FerryGraph, graph_input: Any, thread_id: str, as_json: bool) -> int:
    """Run to the answer, a guard's stop, or a pause for approval, and report it."""
    from langgraph.types import Command

    from graph.runner import Progress, RunSummary, json_report, pending_approvals_of, stream_run

    config = _config(thread_id)
    progress = Progress(out=None if as_json else sys.stdout)
    summary = RunSummary()
    interactive = not as_json and sys.stdin.isatty()
    while True:
        stream_run(graph, graph_input, config, progress, summary)
        state = graph.get_state(config)
        pending = pending_approvals_of(state)
        if not (pending and interactive):
            break
        graph_input = Command(resume=_ask_decisions(pending))
    if as_json:
        _print_json(json_report(thread_id, state.values, summary, pending))
    elif pending:
        for call in pending:
            sys.stderr.write(f"awaiting approval: {call['name']}({json.dumps(call['args'])})\n")
        sys.stderr.write(
            f"decide with: ferry resume --thread {thread_id} --approve (or --reject REASON)\n"
        )
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Ask one question: a new turn on a new or given thread."""
    new_thread = not args.thread
    thread_id = args.thread = args.thread or str(uuid.uuid4())
    with _open_graph(args, need_model=True) as graph:
        if new_thread and not args.json:
            sys.stderr.write(f"thread: {thread_id}\n")
        return _run(graph, {"messages": [("user", args.question)]}, thread_id, args.json)


def cmd_chat(args: argparse.Namespace) -> int:
    """Talk on one thread until end of input."""
    thread_id = args.thread = args.thread or str(uuid.uuid4())
    with _open_graph(args, need_model=True) as graph:
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
                _run(graph, {"messages": [("user", question)]}, thread_id, as_json=False)


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue an interrupted or crashed run from its last checkpoint."""
    from langgraph.types import Command

    from graph.runner import pending_approvals_of

    with _open_graph(args, need_model=True) as graph:
        state = _existing_state(graph, args.thread)
        if args.approve or args.reject is not None:
            if not pending_approvals_of(state):
                raise UserError(f"thread {args.thread!r} has no tool calls awaiting approval")
            decision = (
                {"action": "approve"}
                if args.approve
                else {"action": "reject", "reason": args.reject}
            )
            return _run(graph, Command(resume=decision), args.thread, args.json)
        if not state.next:
            if args.json:
                values = state.values
                _print_json(
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
        return _run(graph, None, args.thread, args.json)


def cmd_history(args: argparse.Namespace) -> int:
    """Show every stored message of a thread."""
    from graph.threads import message_record

    with _open_graph(args, need_model=False) as graph:
        state = _existing_state(graph, args.thread)
        records = [message_record(m) for m in state.values.get("messages", [])]
    if args.json:
        _print_json({"thread_id": args.thread, "messages": records})
        return 0
    for record in records:
        label = record["role"] + (
            f" ({record['status']})" if record.get("status") == "error" else ""
        )
        if record["content"]:
            sys.stdout.write(f"{label}: {record['content']}\n")
        for call in record.get("tool_calls", []):
            sys.stdout.write(
                f"{label}: → {call['name']}({json.dumps(call['args'], ensure_ascii=False)})\n"
            )
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    """List stored threads, most recently updated first."""
    from graph.persistence import open_saver
    from graph.settings import get_settings
    from graph.threads import list_threads

    with open_saver(get_settings()) as saver:
        threads = list_threads(saver)
    if args.json:
        _print_json({"threads": threads})
    else:
        for t in threads:
            sys.stdout.write(f"{t['thread_id']}  {t['updated_at']}  {t['messages']} messages\n")
    return 0


def _db_bytes(path: Any) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _stored_bytes(saver: Saver, settings: Settings) -> int:
    """Disk space the threads take: the SQLite file, or Ferry's tables in Postgres."""
    from graph.persistence import FerrySaver

    return _db_bytes(settings.db) if isinstance(saver, FerrySaver) else saver.stored_bytes()


def _compact(saver: Saver) -> None:
    """Give freed space back to the file system (SQLite; Postgres reuses it in place)."""
    from graph.persistence import FerrySaver
    from graph.retention import compact

    if isinstance(saver, FerrySaver):
        compact(saver)


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete one thread and compact the database."""
    from graph.persistence import open_saver
    from graph.settings import get_settings

    settings = get_settings()
    with open_saver(settings) as saver:
        if saver.get_tuple(_config(args.thread)) is None:
            raise UserError(f"unknown thread {args.thread!r} (see `ferry threads`)")
        saver.delete_thread(args.thread)
        _compact(saver)
        size = _stored_bytes(saver, settings)
    if args.json:
        _print_json({"deleted": [args.thread], "db_bytes": size})
    else:
        sys.stderr.write(f"deleted thread {args.thread}\n")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Keep the last N checkpoints per thread, or drop threads not updated since a date."""
    from datetime import UTC, datetime

    from graph.persistence import FerrySaver, open_saver
    from graph.retention import prune_thread, threads_updated_before
    from graph.settings import get_settings
    from graph.threads import list_threads

    settings = get_settings()
    deleted: list[str] = []
    removed = 0
    with open_saver(settings) as saver:
        if args.keep and not isinstance(saver, FerrySaver):
            raise UserError(
                "prune --keep works on SQLite only; with FERRY_DATABASE_URL use --before DATE"
            )
        before = _stored_bytes(saver, settings)
        if args.before:
            cutoff = datetime.fromisoformat(args.before)
            cutoff = cutoff if cutoff.tzinfo else cutoff.replace(tzinfo=UTC)
            deleted = threads_updated_before(saver, cutoff)
            for thread_id in deleted:
                saver.delete_thread(thread_id)
        if args.keep and isinstance(saver, FerrySaver):
            removed = sum(
                prune_thread(saver, t["thread_id"], args.keep) for t in list_threads(saver)
            )
        _compact(saver)
        after = _stored_bytes(saver, settings)
    report = {
        "threads_deleted": deleted,
        "checkpoints_removed": removed,
        "db_bytes_before": before,
        "db_bytes_after": after,
    }
    if args.json:
        _print_json(report)
    else:
        sys.stderr.write(
            f"deleted {len(deleted)} threads, removed {removed} checkpoints; "
            f"{before} → {after} bytes\n"
        )
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line: subcommands and their options."""
    parser = argparse.ArgumentParser(prog="ferry", description="A durable tool-calling agent.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    ask = command("ask", cmd_ask, "Ask one question (a new turn) and stream the answer.")
    ask.add_argument("question")
    chat = command("chat", cmd_chat, "Ask questions interactively on one thread.")
    resume = command("resume", cmd_resume, "Continue an interrupted or crashed run.")
    history = command("history", cmd_history, "Show a thread's stored messages.")
    threads = command("threads", cmd_threads, "List stored threads.")
    delete = command("delete", cmd_delete, "Delete a thread and compact the database.")
    delete.add_argument("--thread", required=True, help="the thread id")
    prune = command("prune", cmd_prune, "Drop old checkpoints or old threads, then compact.")
    prune.add_argument("--keep", type=_positive, help="checkpoints to keep per thread (newest)")
    prune.add_argument("--before", help="delete threads last updated before this ISO date")
    for p in (ask, chat):
        p.add_argument("--thread", help="thread id to continue (default: a new thread)")
    for p in (resume, history):
        p.add_argument("--thread", required=True, help="the thread id")
    decide = resume.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="approve every pending call")
    decide.add_argument("--reject", metavar="REASON", help="reject every pending call")
    for p in (ask, chat, resume):
        p.add_argument("--model", help="model spec, overriding FERRY_MODEL (e.g. offline)")
    for p in (ask, resume, history, threads, delete, prune):
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ferry` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "prune" and not (args.keep or args.before):
        parser.error("prune needs --keep N or --before DATE")
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        thread = getattr(args, "thread", None)
        hint = f" continue with: ferry resume --thread {thread}" if thread else ""
        sys.stderr.write(f"\nferry: interrupted.{hint}\n")
        return 130
    except Exception as exc:  # noqa: BLE001 - one clear line, never a traceback
        if os.environ.get("FERRY_DEBUG"):
            raise
        from graph.log import redact
        from graph.models import ConfigError

        known = isinstance(exc, UserError | ConfigError)
        sys.stderr.write(f"ferry: {'' if known else type(exc).__name__ + ': '}{redact(str(exc))}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""`ferry`: ask, chat, resume, history and threads, all on the threads stored at `FERRY_DB`.

Only argparse is imported up front, so `ferry --help` is instant; the graph comes when needed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from graph.cli.agent import UserError, cmd_ask, cmd_chat, cmd_resume
from graph.cli.interrupt import exit_now, one_interrupt, quiet_after_interrupt, runs_abandoned
from graph.cli.threads import cmd_delete, cmd_history, cmd_prune, cmd_threads


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
        p.add_argument(
            "--wait", action="store_true", help="wait for another run on the thread to end"
        )
    for p in (ask, resume, history, threads, delete, prune):
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser


def interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line, exit 130; a run left running is not waited for."""
    quiet_after_interrupt()
    thread = getattr(args, "thread", None)
    runs = args.command in ("ask", "chat", "resume")
    hint = f"; continue with: ferry resume --thread {thread}" if thread and runs else ""
    start = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    sys.stderr.write(f"{start}ferry: interrupted{hint}\n")
    if runs_abandoned():
        exit_now(130)
    return 130


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ferry` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "prune" and not (args.keep or args.before):
        parser.error("prune needs --keep N or --before DATE")
    try:
        with one_interrupt():
            return int(args.handler(args))
    except KeyboardInterrupt:
        return interrupted(args)
    except Exception as exc:  # noqa: BLE001 - one clear line, never a traceback
        from graph.log import redact
        from graph.models import ConfigError
        from graph.storage.allowlist import StoredValueError

        if os.environ.get("FERRY_DEBUG"):
            import traceback

            # The traceback quotes error messages, and a provider's may quote the key.
            sys.stderr.write(redact(traceback.format_exc()))
            return 1
        from graph.lease import ThreadBusy

        known = isinstance(exc, UserError | ConfigError | StoredValueError | ThreadBusy)
        from graph.cli.terminal import printable

        line = f"ferry: {'' if known else type(exc).__name__ + ': '}{redact(str(exc))}"
        sys.stderr.write(printable(line) + "\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())

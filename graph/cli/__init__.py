"""`ferry`: ask, chat, resume, history, threads and info, all on the threads stored at `FERRY_DB`.

Only argparse is imported up front, so `ferry --help` is instant; the graph comes when needed.
"""

from __future__ import annotations

import argparse
import os
import sys

from graph.cli.agent import UsageError, stdin_is_piped
from graph.cli.collection import no_collection_at_exit
from graph.cli.errors import debug_traceback, report_failure
from graph.cli.interrupt import (
    end_at_exit,
    exit_now,
    one_interrupt,
    quiet_after_interrupt,
    say_if_interrupted_after_stored,
)
from graph.cli.parser import build_parser, with_ask
from graph.runs.background import runs_abandoned

__all__ = ["build_parser", "main"]


def interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line, exit 130; a run left running is not waited for."""
    quiet_after_interrupt()
    thread = getattr(args, "thread", None)
    runs = args.command in ("ask", "chat", "resume")
    stored = runs and thread and _stored(str(thread))
    hint = f"; continue with: ferry resume --thread {thread}" if stored else ""
    start = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
    sys.stderr.write(f"{start}ferry: interrupted{hint}\n")
    if runs_abandoned():
        exit_now(130)
    return 130


def _stored(thread: str) -> bool:
    """Whether the thread is stored, so `ferry resume` would find it (Ctrl-C may come before).

    Read from the listing's rows (no saver, nothing created); where they cannot say, it is
    taken as stored.
    """
    try:
        from graph.core.settings import get_settings
        from graph.storage.sqlite.listing import listed_from_rows

        settings = get_settings()
        listed = None if settings.database_url else listed_from_rows(settings.db)
    except Exception:  # noqa: BLE001 - the hint is a courtesy: never a second failure
        return True
    return listed is None or any(t["thread_id"] == thread for t in listed)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ferry` console script."""
    if argv is None:  # this process is the command (the console script, `python -m graph.cli`)
        no_collection_at_exit()
    parser = build_parser()
    console = argv is None  # the `ferry` process itself, not a caller's (a test's) own
    argv = sys.argv[1:] if argv is None else argv
    if not argv and stdin_is_piped():  # `echo "what is 2+2" | ferry`: the question
        argv = ["ask"]
    args = parser.parse_args(with_ask(parser, argv))
    if args.command == "prune" and not (args.keep or args.before):
        parser.error("prune needs --keep N or --before DATE")
    try:
        with one_interrupt():
            try:
                code = int(args.handler(args))
            except KeyboardInterrupt:
                # Handled inside: a second Ctrl-C during it is still ignored. Outside, the
                # default handler is back, and a KeyboardInterrupt there would leave the
                # interpreter waiting at exit for the abandoned run's tool.
                return interrupted(args)
            if console:
                end_at_exit(code)
        say_if_interrupted_after_stored()
        return code
    except BrokenPipeError:  # the reader left (`ferry threads | head`): nothing more to say
        # Python would report the pipe again when flushing stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - one clear line, never a traceback
        if os.environ.get("FERRY_DEBUG") and not isinstance(exc, UsageError):
            return debug_traceback()
        return report_failure(exc, args)

"""The `ferry` command line: subcommands, their options, and `ferry "question"` as `ask`."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from graph.cli.agent import cmd_ask, cmd_resume
from graph.cli.chat import cmd_chat
from graph.cli.conversion import add_conversion_commands
from graph.cli.errors import did_you_mean
from graph.cli.info import cmd_info, cmd_tools
from graph.cli.memory import add_memory_commands
from graph.cli.temporal import add_temporal_commands
from graph.cli.threads import (
    cmd_delete,
    cmd_fork,
    cmd_history,
    cmd_prune,
    cmd_threads,
    cmd_undo,
)
from graph.cli.tool_call import add_tool_call_command, add_tools_option
from graph.cli.trust import add_trust_commands

COMMANDS = (
    *("ask", "chat", "resume", "history", "threads", "fork", "undo", "delete", "prune"),
    *("info", "tools"),
    *("memory", "trust", "untrust", "migrate", "export"),
    *("worker", "cancel"),
)
_TOP_LEVEL_OPTIONS = ("-h", "--help", "--version")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


class _Version(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show Ferry's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("ferry-agent")
        except PackageNotFoundError:
            found = "unknown (not installed)"
        sys.stdout.write(f"ferry {found}\n")
        parser.exit(0)


def _options_of(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """The option strings `ferry COMMAND` accepts."""
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public way to its subparsers
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return list(action.choices[command]._option_string_actions)  # noqa: SLF001
    return []


def _unknown(
    parser: argparse.ArgumentParser, what: str, word: str, known: Sequence[str]
) -> NoReturn:
    """Exit 2 as argparse does: the unknown word, the closest known one, and how to ask it."""
    hint = did_you_mean(word, known)
    ask = f" (to ask it: ferry ask {word})" if what == "command" else " (see ferry --help)"
    parser.error(f"unknown {what} {word!r}{hint}{ask}")


def with_ask(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`ferry "question" …` means `ferry ask "question" …`; an unknown word or option is an error.

    A bare word (no space, no `?`) is far more often a mistyped command than a question of one
    word, which `ferry ask WORD` still asks; nothing is stored and no model is called.
    """
    if not argv or argv[0] in COMMANDS or argv[0] in _TOP_LEVEL_OPTIONS:
        return argv
    first = argv[0]
    if re.fullmatch(r"[A-Za-z][\w-]*", first):
        _unknown(parser, "command", first, COMMANDS)
    if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", first):
        known = [*_options_of(parser, "ask"), *_TOP_LEVEL_OPTIONS]
        if first.split("=", 1)[0] not in known:
            _unknown(parser, "option", first.split("=", 1)[0], known)
    return ["ask", *argv]


def build_parser() -> argparse.ArgumentParser:
    """The command line: subcommands and their options."""
    parser = argparse.ArgumentParser(
        prog="ferry",
        description='A durable tool-calling agent. `ferry "QUESTION"` is short for `ferry ask`.',
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], help: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    ask = command("ask", cmd_ask, "Ask one question (a new turn) and stream the answer.")
    ask.add_argument(
        "question",
        nargs="?",
        help='the question; piped stdin is put before it, or, alone or for "-", is the question',
    )
    ask.set_defaults(usage_error=ask.error)  # no question and nothing piped: argparse's error
    chat = command("chat", cmd_chat, "Ask questions interactively on one thread.")
    resume = command("resume", cmd_resume, "Continue an interrupted or crashed run.")
    history = command("history", cmd_history, "Show a thread's stored messages.")
    history.add_argument(
        "--checkpoints",
        action="store_true",
        help="list the thread's checkpoints (id, time, what happened) instead of its messages",
    )
    threads = command("threads", cmd_threads, "List stored threads.")
    fork = command(
        "fork", cmd_fork, "Start a new thread from a thread as it was at one of its checkpoints."
    )
    fork.add_argument("--at", required=True, metavar="CHECKPOINT", help="checkpoint id (or prefix)")
    fork.add_argument("--to", metavar="NEW", help="the new thread's id (default: a new one)")
    undo = command("undo", cmd_undo, "Take back a thread's last turn (its tools' effects stay).")
    delete = command("delete", cmd_delete, "Delete a thread and compact the database.")
    delete.add_argument("--thread", required=True, help="the thread id")
    prune = command("prune", cmd_prune, "Drop old checkpoints or old threads, then compact.")
    prune.add_argument("--keep", type=_positive, help="checkpoints to keep per thread (newest)")
    prune.add_argument("--before", help="delete threads last updated before this ISO date")
    info = command("info", cmd_info, "Show the model, database, files root, tools and settings.")
    tools = command(
        "tools", cmd_tools, "List the tools the model is offered, with their arguments."
    )
    add_tool_call_command(tools)  # `ferry tools call NAME ARGS`
    for p in (ask, chat):
        which = p.add_mutually_exclusive_group()
        which.add_argument("--thread", help="thread id to continue (default: a new thread)")
        which.add_argument(
            "-c",
            "--continue",
            dest="continue_",
            action="store_true",
            help="continue the most recently updated thread",
        )
    for p in (resume, history, fork, undo):
        p.add_argument("--thread", required=True, help="the thread id")
    decide = resume.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="approve every pending call")
    decide.add_argument("--reject", metavar="REASON", help="reject every pending call")
    for p in (ask, chat, resume):
        p.add_argument("--model", help="model spec, overriding FERRY_MODEL (e.g. offline)")
        p.add_argument(
            "--wait", action="store_true", help="wait for another run on the thread to end"
        )
    for p in (ask, resume):
        p.add_argument(
            "--schema",
            metavar="FILE|JSON",
            help="a JSON schema the answer must match: it is printed as JSON (exit 1 if none "
            "matched)",
        )
    for p in (ask, resume, history, threads, fork, undo, delete, prune, info, tools):
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    for p in (ask, chat, resume, info, tools):  # the commands that offer or list the tools
        add_tools_option(p)
    add_memory_commands(sub)
    add_trust_commands(sub)
    add_conversion_commands(sub)
    add_temporal_commands(sub)  # worker, cancel; ask/chat/resume routed to Temporal when asked
    return parser

"""`ferry chat`: turns on one thread until end of input, in-process or on Temporal.

Ctrl-C while an answer runs brings the prompt back. In-process it cancels that answer: the run
stops at its next step boundary (a reply still being written is dropped:
graph/runs/background.py), and the turn stays resumable (`ferry resume`, or ask on: the calls it
left are answered as interrupted). On Temporal the answer goes on without its client, and the
next question waits for it. Ctrl-C at the prompt ends the chat (exit 0).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING

from graph.cli.agent import open_runner, pick_thread, run_to_stop
from graph.cli.interrupt import (
    exit_now,
    interrupt_again,
    quiet_after_interrupt,
    quiet_cancelled_runs,
    rearm_interrupt,
)
from graph.runs.background import runs_abandoned, wait_for_cancelled_runs

if TYPE_CHECKING:
    from graph.runs.runner import TurnRunner


def cmd_chat(args: argparse.Namespace) -> int:
    """Talk on one thread until end of input, `exit`, or Ctrl-C at the prompt."""
    with open_runner(args, interactive=sys.stdin.isatty()) as runner:
        quiet_cancelled_runs("ferry", "openai._base_client")  # the loggers the CLI set up
        if args.thread or args.continue_:
            pick_thread(runner.graph, args)
        else:
            args.thread = str(uuid.uuid4())
        sys.stderr.write(f"thread: {args.thread}  (Ctrl-D to end)\n")
        try:
            code = _talk(runner, args.thread)
        except KeyboardInterrupt:  # just after a cancelled answer: as at the prompt
            code = _left_at_prompt()
        if runs_abandoned():  # a cancelled answer still finishing: not waited for, as in `ask`
            quiet_after_interrupt()
            exit_now(code)
        return code


def _talk(runner: TurnRunner, thread_id: str) -> int:
    """Ask each question read at the prompt; the exit code once the person leaves."""
    while True:
        try:
            question = _read_question()
        except EOFError:
            sys.stderr.write("\n")
            return 0
        except KeyboardInterrupt:  # at the idle prompt: nothing runs, nothing to resume
            return _left_at_prompt()
        if question in ("exit", "quit"):
            return 0
        if question:
            _answer(runner, question, thread_id)


def _read_question() -> str:
    """The next line read at the prompt: on a terminal `input`'s (line editing), else on stderr.

    Piped output then holds the answers alone, as with `ferry ask`.
    """
    if sys.stdin.isatty() and sys.stdout.isatty():
        return input("you> ").strip()
    sys.stderr.write("you> ")
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.strip()


def _answer(runner: TurnRunner, question: str, thread_id: str) -> None:
    """One turn; Ctrl-C leaves it and returns, with the next Ctrl-C armed again."""
    from langchain_core.messages import HumanMessage

    try:
        wait_for_cancelled_runs(_say_waiting)
    except KeyboardInterrupt:
        _say(f"ferry: not asked: the cancelled answer is still finishing on {thread_id}")
        rearm_interrupt()
        return
    try:
        events = runner.start(thread_id, HumanMessage(question))
        run_to_stop(runner, events, thread_id, as_json=False, interactive=sys.stdin.isatty())
    except KeyboardInterrupt:
        if runner.leaves_turn_running:
            _say(
                "ferry: left the answer running on Temporal; see it with: "
                f"ferry resume --thread {thread_id}"
            )
        else:
            _say(
                f"ferry: answer cancelled; continue it with: ferry resume --thread {thread_id}, "
                "or ask on"
            )
        rearm_interrupt()  # last: a Ctrl-C from here on is one at the prompt
        return
    interrupt_again()  # one pressed as the answer was stored is one at the prompt


def _say_waiting() -> None:
    _say(
        "ferry: waiting for the cancelled answer to finish its running step "
        "(a tool call may take up to its timeout, FERRY_TOOL_TIMEOUT_S)",
        after_ctrl_c=False,
    )


def _say(line: str, *, after_ctrl_c: bool = True) -> None:
    start = "\n" if after_ctrl_c and sys.stderr.isatty() else ""  # after the terminal's ^C
    sys.stderr.write(f"{start}{line}\n")
    sys.stderr.flush()


def _left_at_prompt() -> int:
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return 0

"""Show a turn's events as the CLI does: answer tokens on stdout, progress lines on stderr.

Whichever runner ran the turn (graph/runs/runner.py); what it reports is computed from what it
stored (graph/runs/report.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from graph.core.controls import printable
from graph.runs.runner import Event, Finished, Line, Paused, Started, Token


@dataclass
class Progress:
    """Where a run's output goes: answer tokens to `out`, tool progress to `err`.

    Both are written through `printable`: the text comes from a model or a tool, and its
    control characters must not drive the terminal.
    """

    # Looked up when a Progress is made, not when this module is imported, so a replaced
    # `sys.stdout` (a test's capture, a redirected console) is the one written to.
    out: TextIO | None = field(default_factory=lambda: sys.stdout)
    err: TextIO | None = field(default_factory=lambda: sys.stderr)
    printed_answer: bool = False

    def token(self, text: str) -> None:
        """Print a piece of the answer as soon as it arrives."""
        if self.out and text:
            self.out.write(printable(text))
            self.out.flush()
            self.printed_answer = True

    def end_answer(self) -> None:
        """End the line of a streamed answer, if one is open."""
        if self.printed_answer and self.out:
            self.out.write("\n")
            self.out.flush()
            self.printed_answer = False

    def note(self, line: str) -> None:
        """Print a progress line (a tool call starting or ending)."""
        if self.err:
            self.end_answer()  # a tool line must not land in the middle of a streamed sentence
            self.err.write(printable(line) + "\n")
            self.err.flush()


def show_turn(
    events: Iterable[Event], progress: Progress, on_start: Callable[[], None] = lambda: None
) -> Paused | Finished:
    """Show a turn's events as they come; the one it stopped with (paused or finished).

    `on_start` runs once the turn holds its thread, so a turn refused as busy prints its one
    line and nothing else.
    """
    reply = None  # the reply whose tokens are being printed
    for event in events:
        if isinstance(event, Started):
            on_start()
        elif isinstance(event, Line):
            progress.note(event.text)
        elif isinstance(event, Token):
            if event.reply_id != reply:
                progress.end_answer()  # a new reply starts on a line of its own
                reply = event.reply_id
            progress.token(event.text)
        else:
            progress.end_answer()
            return event
    raise AssertionError("a turn's events end with Paused or Finished")

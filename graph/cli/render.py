"""Run one invocation of the graph for the CLI: stream it and show its progress.

What it reports is computed from what it stored (graph/runs/report.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StreamMode

from graph.cli.interrupt import run_in_background
from graph.core.controls import printable
from graph.core.messages import unanswered_calls
from graph.nodes import RunContext
from graph.runs.progress import call_line, record_update
from graph.runs.report import pending_approvals_of


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

    def reply(self, message: AIMessage) -> None:
        """Nothing: a reply is printed from its tokens as they arrive (`token`)."""

    def note(self, line: str) -> None:
        """Print a progress line (a tool call starting or ending)."""
        if self.err:
            self.end_answer()  # a tool line must not land in the middle of a streamed sentence
            self.err.write(printable(line) + "\n")
            self.err.flush()


def stream_run(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    graph_input: Any,
    config: RunnableConfig,
    progress: Progress,
    on_start: Callable[[], None] = lambda: None,
) -> None:
    """Run the graph to its next stop, streaming answer tokens and tool progress.

    `on_start` runs when the first event arrives: the run then holds its thread, so a run
    refused as busy prints its one line and nothing else.
    """
    modes: list[StreamMode] = ["messages", "updates"]  # a list: a tuple is not read as modes
    # In a thread of its own, so Ctrl-C stops the CLI at once instead of waiting for the run.
    events = run_in_background(
        lambda: graph.stream(graph_input, config, stream_mode=modes, context=RunContext())
    )
    streaming = None  # the id of the reply whose tokens are being printed
    for index, event in enumerate(events):
        if index == 0:
            on_start()
        mode, chunk = cast(tuple[str, Any], event)  # with several modes, events are pairs
        if mode == "messages":
            message, _meta = chunk
            if isinstance(message, AIMessageChunk | AIMessage):
                if streaming not in (None, message.id):
                    # A second reply in the same model step: the first was cut short, dropped
                    # and asked for again (graph/nodes.py); say so rather than run them together.
                    progress.note("(the reply was cut short; asking the model again)")
                streaming = message.id
                progress.token(message.text)
            continue
        streaming = None
        if not chunk.get("__metadata__", {}).get("cached"):  # replays of pre-crash results
            for node, update in chunk.items():
                record_update(node, update, progress)
    progress.end_answer()


def announce_resumed_calls(state: Any, progress: Progress, *, decided: bool) -> None:
    """Show the calls a resumed run is about to run, as `ask` shows them when the model asks.

    Not those whose results were stored before the interruption (they are replayed), nor,
    unless a decision came with the resume, those still awaiting approval.
    """
    finished = {
        message.tool_call_id
        for task in state.tasks
        if isinstance(task.result, dict)
        for message in task.result.get("messages", [])
        if isinstance(message, ToolMessage)
    }
    held = set() if decided else {call["id"] for call in pending_approvals_of(state)}
    for call in unanswered_calls(state.values.get("messages") or []):
        if call["id"] not in finished | held:
            progress.note(call_line(call))

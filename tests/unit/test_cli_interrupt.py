"""The CLI's run reader: events in order, the run's errors raised in the caller, Ctrl-C once."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import graph.cli as cli
import graph.cli.parser as cli_parser
from graph.cli.agent import has_unfinished_run
from graph.cli.interrupt import one_interrupt, run_in_background, runs_abandoned


def test_events_arrive_in_order_from_another_thread() -> None:
    threads: list[str] = []

    def produce() -> Iterator[int]:
        threads.append(threading.current_thread().name)
        yield from range(5)

    assert list(run_in_background(produce)) == [0, 1, 2, 3, 4]
    assert threads == ["ferry-run"]
    assert not runs_abandoned()


def test_the_runs_error_is_raised_in_the_reader() -> None:
    def produce() -> Iterator[int]:
        yield 1
        raise ValueError("provider said no")

    events = run_in_background(produce)
    assert next(events) == 1
    with pytest.raises(ValueError, match="provider said no"):
        next(events)


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can be set only in the main thread",
)
def test_only_the_first_ctrl_c_interrupts() -> None:
    before = signal.getsignal(signal.SIGINT)  # Python's handler, as in a terminal (conftest)
    with one_interrupt():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # ignored: no second KeyboardInterrupt
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can be set only in the main thread",
)
def test_a_second_ctrl_c_during_the_first_ones_cleanup_is_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Out of the guard, Python's handler would raise again, and at exit the interpreter
    # would wait for the abandoned run's tool (a hang seen under load with two quick Ctrl-Cs).
    def answering(_args: object) -> int:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the answer runs
        return 0

    monkeypatch.setattr(cli_parser, "cmd_ask", answering)
    monkeypatch.setattr(cli, "quiet_after_interrupt", lambda: signal.raise_signal(signal.SIGINT))
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["ask", "q?", "--thread", "t1"]) == 130
    said = capsys.readouterr().err
    assert said == "ferry: interrupted; continue with: ferry resume --thread t1\n"
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can be set only in the main thread",
)
def test_a_process_started_immune_to_ctrl_c_stays_immune() -> None:
    started_with = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup ferry … &` starts
    try:
        with one_interrupt():
            signal.raise_signal(signal.SIGINT)  # ignored: no KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, started_with)


def _state(*messages: object, next: tuple[str, ...] = ()) -> SimpleNamespace:
    values = {"messages": list(messages), "stop_reason": "answered"}
    return SimpleNamespace(values=values, next=next, tasks=(), interrupts=())


def test_resume_goes_by_the_messages_not_by_the_plan() -> None:
    call = {"id": "c1", "name": "calculator", "args": {"expression": "1"}}
    asked = HumanMessage("1?")
    calling = AIMessage("", tool_calls=[call])
    result = ToolMessage("1", tool_call_id="c1")
    assert has_unfinished_run(_state(asked))
    assert has_unfinished_run(_state(asked, calling))
    assert has_unfinished_run(_state(asked, calling, result))
    assert not has_unfinished_run(_state(asked, calling, result, AIMessage("1")))
    assert not has_unfinished_run(_state())


def test_a_failure_to_start_the_run_is_raised_in_the_reader() -> None:
    def produce() -> Iterator[int]:
        raise LookupError("no such thread")

    with pytest.raises(LookupError):
        list(run_in_background(produce))


def test_a_reader_that_fails_ends_the_run_and_waits_for_it() -> None:
    closed = threading.Event()

    def produce() -> Iterator[int]:
        try:
            yield from range(1000)
        finally:
            closed.set()

    with pytest.raises(BrokenPipeError):
        for _ in run_in_background(produce):
            raise BrokenPipeError
    assert closed.is_set()
    assert not runs_abandoned()


def test_resume_replays_a_step_saved_before_its_checkpoint() -> None:
    """A kill right after the input's step was written: nothing planned, its writes saved."""
    saved = SimpleNamespace(name="__start__", result={"messages": [HumanMessage("1?")]})
    state = _state(AIMessage("an earlier answer"))
    state.tasks = (saved,)
    assert has_unfinished_run(state)

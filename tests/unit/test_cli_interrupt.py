"""The CLI's run reader: events in order, the run's errors raised in the caller, Ctrl-C once."""

from __future__ import annotations

import io
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import graph.cli as cli
import graph.cli.chat as chat_module
import graph.cli.interrupt as interrupt
import graph.cli.parser as cli_parser
from graph.cli.agent import has_unfinished_run
from graph.cli.interrupt import one_interrupt, quiet_cancelled_runs, rearm_interrupt
from graph.runs.background import run_in_background, runs_abandoned, wait_for_cancelled_runs
from graph.runs.runner import InProcessRunner


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
def test_after_the_first_ctrl_c_later_ones_meet_a_handler_that_does_nothing() -> None:
    # A Ctrl-C that arrives while the handler is being changed is run by CPython with the
    # handler set since; were that SIG_IGN, CPython prints "Signal 2 ignored due to race
    # condition" and a traceback on the terminal (seen in `ferry chat` after a quick double
    # Ctrl-C on a loaded machine). The window is inside C, so what is tested is the handler.
    with one_interrupt():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        ignoring = signal.getsignal(signal.SIGINT)
        assert ignoring is not signal.SIG_IGN and callable(ignoring)
        signal.raise_signal(signal.SIGINT)  # ignored: no second KeyboardInterrupt


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
    assert said == "ferry: interrupted\n"  # nothing was stored: no `ferry resume` to offer
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can be set only in the main thread",
)
def test_ctrl_c_offers_resume_only_for_a_thread_that_is_stored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["ask", "what is 2+2?", "--thread", "t1", "--model", "offline"]) == 0

    def answering(_args: object) -> int:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the next answer runs
        return 0

    monkeypatch.setattr(cli_parser, "cmd_ask", answering)
    monkeypatch.setattr(cli, "quiet_after_interrupt", lambda: None)  # logging stays as it was
    capsys.readouterr()
    assert cli.main(["ask", "and 3+3?", "--thread", "t1"]) == 130
    assert (
        capsys.readouterr().err == "ferry: interrupted; continue with: ferry resume --thread t1\n"
    )
    assert cli.main(["ask", "q?", "--thread", "never-stored"]) == 130
    assert capsys.readouterr().err == "ferry: interrupted\n"


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


main_thread_only = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can be set only in the main thread",
)


@main_thread_only
def test_rearmed_ctrl_c_interrupts_again_but_not_the_same_double_press(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(interrupt, "_clock", lambda: now[0])
    before = signal.getsignal(signal.SIGINT)
    with one_interrupt():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # cancels the answer
        rearm_interrupt()
        now[0] += interrupt.DOUBLE_PRESS_S / 2
        signal.raise_signal(signal.SIGINT)  # the same impatient press: ignored
        now[0] += interrupt.DOUBLE_PRESS_S
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # a new press, at the prompt
        signal.raise_signal(signal.SIGINT)  # and again only the first of its kind counts
    assert signal.getsignal(signal.SIGINT) is before


@main_thread_only
def test_rearming_a_process_started_immune_to_ctrl_c_leaves_it_immune() -> None:
    started_with = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `nohup ferry chat` starts
    try:
        with one_interrupt():
            rearm_interrupt()
            signal.raise_signal(signal.SIGINT)  # ignored: no KeyboardInterrupt
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, started_with)


def test_a_cancelled_run_ends_at_its_next_step_and_the_next_turn_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    running_step, step_may_end, closed = threading.Event(), threading.Event(), threading.Event()
    steps: list[int] = []
    log = logging.getLogger("ferry.test_cancel")

    def produce() -> Iterator[int]:
        try:
            for step in range(5):
                steps.append(step)
                if step == 1:
                    running_step.set()
                    step_may_end.wait(30)  # a tool call, held
                    log.warning("the cancelled run's step ended")
                yield step
        finally:
            closed.set()

    events = run_in_background(produce)
    assert next(events) == 0
    assert running_step.wait(30)
    with pytest.raises(KeyboardInterrupt):
        events.throw(KeyboardInterrupt)  # Ctrl-C while the reader waits for step 1
    assert runs_abandoned()
    quiet_cancelled_runs("ferry")
    announced: list[str] = []

    def announce() -> None:
        announced.append("waiting")
        step_may_end.set()  # the held call returns only now: the wait must outlast it

    wait_for_cancelled_runs(announce)

    assert announced == ["waiting"]
    assert not runs_abandoned() and closed.is_set()
    assert steps == [0, 1]  # the step that ran finished; no later one started
    wait_for_cancelled_runs(announce)  # nothing left to wait for: nothing said
    assert announced == ["waiting"]


def test_the_log_lines_of_a_cancelled_run_are_dropped() -> None:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("ferry.test_quiet")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        quiet_cancelled_runs("ferry.test_quiet")
        quiet_cancelled_runs("ferry.test_quiet")  # once is enough: no second filter
        assert len(handler.filters) == 1
        gate = threading.Event()

        def produce() -> Iterator[int]:
            logger.warning("while the answer runs")
            yield 1
            gate.wait(30)
            logger.warning("after the cancel")
            yield 2

        events = run_in_background(produce)
        assert next(events) == 1
        with pytest.raises(KeyboardInterrupt):
            events.throw(KeyboardInterrupt)
        gate.set()
        wait_for_cancelled_runs(lambda: None)
        logger.warning("the chat's own line")
    finally:
        logger.removeHandler(handler)
    assert records == ["while the answer runs", "the chat's own line"]


@main_thread_only
def test_a_second_ctrl_c_while_chat_handles_the_first_is_ignored_and_the_chat_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []

    def starting(_runner: object, _thread_id: str, question: Any, *_args: object) -> Any:
        asked.append(question.text)
        return iter(())

    def answering(*_args: object, **_kw: object) -> int:
        if len(asked) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C while the first answer runs
        return 0

    said = chat_module._say

    def say_pressed_again(line: str, **kwargs: bool) -> None:
        signal.raise_signal(signal.SIGINT)  # the impatient second press, mid-handling
        said(line, **kwargs)

    monkeypatch.setattr(InProcessRunner, "start", starting)
    monkeypatch.setattr(chat_module, "run_to_stop", answering)
    monkeypatch.setattr(chat_module, "_say", say_pressed_again)
    monkeypatch.setattr(sys, "stdin", io.StringIO("first?\nsecond?\n"))
    before = signal.getsignal(signal.SIGINT)

    assert cli.main(["chat", "--model", "offline", "--thread", "t1"]) == 0

    assert asked == ["first?", "second?"]
    err = capsys.readouterr().err
    assert err.splitlines()[1:] == [  # stdin is not a terminal: the prompts are on stderr
        "you> ferry: answer cancelled; continue it with: ferry resume --thread t1, or ask on",
        "you> you> ",  # the end of input ends the last prompt's line
    ], err
    assert signal.getsignal(signal.SIGINT) is before

"""Piped stdin: alone it is the question, with a question it goes before it as context, bounded.

Each test runs `graph.cli.main` in this process on the offline model with a stand-in stdin
(a pipe is a stream whose `isatty()` is False), then reads the question the model was sent:
the HumanMessage stored on the thread.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from graph.builder import build_graph
from graph.cli import main
from graph.cli.agent import PIPED_INPUT_LIMIT_CHARS
from graph.core.settings import Settings
from graph.storage import open_saver
from graph.storage.threads.reading import list_threads

Ferry = Callable[..., tuple[int, str, str]]


class Terminal(io.StringIO):
    """A stdin that is a terminal: never read unless the question is `-`."""

    def isatty(self) -> bool:
        return True


class Unreadable(io.StringIO):
    """A stdin that must not be read (pytest's own stand-in says `readable()` is False)."""

    def readable(self) -> bool:
        return False

    def read(self, size: int | None = -1) -> str:
        raise AssertionError("stdin was read")


@pytest.fixture
def ferry(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Ferry]:
    """`ferry ARGS…` with `stdin` (text: a pipe); its exit code, stdout and stderr."""
    loggers = [logging.getLogger(name) for name in ("ferry", "openai._base_client")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]

    def run(*args: str, stdin: str | io.TextIOBase) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin) if isinstance(stdin, str) else stdin)
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def questions(tmp_path: Path) -> list[str]:
    """Every question stored, over all threads (the text each model call started from)."""
    settings = Settings(db=tmp_path / "ferry.db", model="offline")
    if not settings.db.exists():
        return []
    with open_saver(settings) as saver:
        graph = build_graph(checkpointer=saver, settings=settings, tools=[])
        asked: list[str] = []
        for thread in reversed(list_threads(saver)):  # oldest first
            state = graph.get_state({"configurable": {"thread_id": thread["thread_id"]}})
            messages: list[Any] = state.values["messages"]
            asked += [m.content for m in messages if isinstance(m, HumanMessage)]
        return asked


def test_piped_text_alone_is_the_question(ferry: Ferry, tmp_path: Path) -> None:
    code, out, err = ferry(stdin="What is 2 + 2?\n")  # echo "What is 2 + 2?" | ferry

    assert code == 0, err
    assert out == "`2 + 2` = 4\n"
    assert questions(tmp_path) == ["What is 2 + 2?"]


@pytest.mark.parametrize("args", [["ask"], ["--json"], ["ask", "-"]], ids=" ".join)
def test_ask_without_a_question_or_with_dash_reads_it_from_the_pipe(
    ferry: Ferry, tmp_path: Path, args: list[str]
) -> None:
    code, out, err = ferry(*args, stdin="  What is\n3 * 3?\n\n")

    assert code == 0, err
    answer = json.loads(out)["answer"] if "--json" in args else out.rstrip("\n")
    assert answer == "`3 * 3` = 9"
    assert questions(tmp_path) == ["What is\n3 * 3?"]


def test_piped_text_goes_before_the_question_as_its_context(ferry: Ferry, tmp_path: Path) -> None:
    notes = "\n    indented first line\nlast line\n\n"  # `cat notes.txt | ferry "…"`

    code, _, err = ferry("what is 6 * 7?", stdin=notes)

    assert code == 0, err
    # The first line keeps its indentation (code); surrounding blank lines go.
    assert questions(tmp_path) == ["    indented first line\nlast line\n\nwhat is 6 * 7?"]


def test_an_empty_pipe_with_a_question_asks_the_question(ferry: Ferry, tmp_path: Path) -> None:
    code, out, err = ferry("ask", "What is 2 + 2?", stdin=" \n")

    assert (code, out) == (0, "`2 + 2` = 4\n"), err
    assert questions(tmp_path) == ["What is 2 + 2?"]


def test_an_empty_pipe_and_no_question_is_the_usage_error(ferry: Ferry, tmp_path: Path) -> None:
    for args in ([], ["ask"], ["ask", "--thread", "t1"]):
        code, out, err = ferry(*args, stdin="\n  \n")

        assert (code, out) == (2, ""), args
        assert err.startswith("usage: ferry ask"), err
        assert err.endswith(
            "error: the following arguments are required: question (or pipe it on stdin)\n"
        ), err
    assert questions(tmp_path) == []


def test_an_empty_pipe_for_dash_says_stdin_was_empty(ferry: Ferry, tmp_path: Path) -> None:
    code, out, err = ferry("ask", "-", stdin="\n  \n")

    assert (code, out) == (2, "")
    assert err == "ferry: the question is empty (nothing on stdin)\n"
    assert questions(tmp_path) == []


def test_past_the_limit_nothing_is_stored_and_the_rest_is_never_read(
    ferry: Ferry, tmp_path: Path
) -> None:
    pipe = io.StringIO("x" * (PIPED_INPUT_LIMIT_CHARS + 5000))

    code, out, err = ferry("summarise this", stdin=pipe)

    assert (code, out) == (2, "")
    assert err == (
        "ferry: stdin holds more than 100,000 characters, the limit for piped input; save it "
        'under FERRY_FILES_ROOT and ask about the file: ferry "read notes.txt"\n'
    )
    assert pipe.tell() == PIPED_INPUT_LIMIT_CHARS + 1  # read only as far as the limit
    assert questions(tmp_path) == []


def test_exactly_the_limit_is_accepted(ferry: Ferry, tmp_path: Path) -> None:
    text = "y" * PIPED_INPUT_LIMIT_CHARS

    code, _, err = ferry("ask", "summarise this", stdin=text)

    assert code == 0, err
    assert questions(tmp_path) == [f"{text}\n\nsummarise this"]


def test_past_the_limit_with_json_is_one_usage_error_object(ferry: Ferry, tmp_path: Path) -> None:
    code, out, _ = ferry("--json", stdin="z" * (PIPED_INPUT_LIMIT_CHARS + 1))

    assert code == 2
    report = json.loads(out)
    assert report["error"]["type"] == "usage_error"
    assert "100,000 characters" in report["error"]["message"]
    assert questions(tmp_path) == []


def test_a_pipe_that_is_not_utf8_text_is_a_usage_error(ferry: Ferry, tmp_path: Path) -> None:
    pipe = io.TextIOWrapper(io.BytesIO(b"\x89PNG\r\n\x1a\n\xff\xfe"), encoding="utf-8")

    code, _, err = ferry("describe this image", stdin=pipe)

    assert code == 2
    assert err.startswith("ferry: stdin is not UTF-8 text (invalid start byte at byte "), err
    assert questions(tmp_path) == []


def test_a_terminal_is_not_read_for_a_question_given(ferry: Ferry, tmp_path: Path) -> None:
    terminal = Terminal("typed ahead\n")

    code, out, err = ferry("What is 2 + 2?", stdin=terminal)

    assert (code, out) == (0, "`2 + 2` = 4\n"), err
    assert terminal.tell() == 0
    assert questions(tmp_path) == ["What is 2 + 2?"]


def test_no_question_at_a_terminal_says_how_to_give_one(ferry: Ferry, tmp_path: Path) -> None:
    terminal = Terminal("typed ahead\n")

    code, out, err = ferry("ask", stdin=terminal)

    assert (code, out) == (2, "")
    assert err.startswith("usage: ferry ask") and "(or pipe it on stdin)" in err, err
    assert terminal.tell() == 0


def test_no_arguments_at_a_terminal_is_still_the_usage_message(ferry: Ferry) -> None:
    code, out, err = ferry(stdin=Terminal())

    assert (code, out) == (2, "")
    assert "usage: ferry" in err and "required: command" in err


def test_a_stdin_that_cannot_be_read_is_not_piped_input(ferry: Ferry, tmp_path: Path) -> None:
    code, _, err = ferry("What is 2 + 2?", stdin=Unreadable())

    assert code == 0, err
    assert questions(tmp_path) == ["What is 2 + 2?"]


def test_chat_still_reads_piped_questions_line_by_line(ferry: Ferry, tmp_path: Path) -> None:
    code, out, err = ferry("chat", stdin="What is 2 + 2?\n\nWhat is 3 * 3?\n")

    assert code == 0, err
    assert out == "`2 + 2` = 4\n`3 * 3` = 9\n"  # piped: the prompts go to stderr
    assert err.count("you> ") == 4
    assert questions(tmp_path) == ["What is 2 + 2?", "What is 3 * 3?"]


def test_bytes_that_are_not_utf8_are_a_usage_error_and_nothing_is_stored(
    ferry: Ferry, tmp_path: Path
) -> None:
    # As Python's own stdin is under a C or POSIX locale: undecodable bytes would pass
    # through as lone surrogates, be stored, and fail when printed.
    piped = io.TextIOWrapper(io.BytesIO(b"caf\xe9 au lait"), errors="surrogateescape")

    code, out, err = ferry("ask", "summarise this", stdin=piped)

    assert (code, out) == (2, "")
    assert err == "ferry: stdin is not UTF-8 text (invalid continuation byte at byte 3)\n"
    assert questions(tmp_path) == []

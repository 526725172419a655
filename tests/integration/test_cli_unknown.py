"""A mistyped command or option is a usage error (exit 2), never a question sent to the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_helpers import Ferry, ferry_env, new_thread_id, one_json_object, succeeded


def error_line(stderr: str) -> str:
    """argparse's message: after the usage line, `ferry: error: MESSAGE`."""
    usage, line = stderr.splitlines()[0], stderr.splitlines()[-1]
    assert usage.startswith("usage: ferry") and line.startswith("ferry: error: "), stderr
    return line.removeprefix("ferry: error: ")


def stored_threads(cli: Ferry, tmp_path: Path) -> list[object]:
    """The threads `ferry threads --json` lists for this test's database."""
    threads: list[object] = one_json_object(
        cli("threads", "--json", env=ferry_env(tmp_path), cwd=tmp_path)
    )["threads"]
    return threads


def test_a_word_close_to_a_command_suggests_it_and_stores_nothing(
    cli: Ferry, tmp_path: Path
) -> None:
    done = cli("hsitory", env=ferry_env(tmp_path, FERRY_MODEL="offline"), cwd=tmp_path)

    assert done.returncode == 2
    assert error_line(done.stderr) == (
        "unknown command 'hsitory'; did you mean 'history'? (to ask it: ferry ask hsitory)"
    )
    assert done.stdout == ""
    assert not (tmp_path / "ferry.db").exists()
    assert stored_threads(cli, tmp_path) == []


def test_any_other_bare_word_is_an_unknown_command(cli: Ferry, tmp_path: Path) -> None:
    done = cli("logs", env=ferry_env(tmp_path, FERRY_MODEL="offline"), cwd=tmp_path)

    assert done.returncode == 2
    assert error_line(done.stderr) == "unknown command 'logs' (to ask it: ferry ask logs)"
    assert stored_threads(cli, tmp_path) == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--frobnicate", "unknown option '--frobnicate' (see ferry --help)"),
        (
            "--contniue",
            "unknown option '--contniue'; did you mean '--continue'? (see ferry --help)",
        ),
    ],
)
def test_an_unknown_leading_option_is_named(
    cli: Ferry, tmp_path: Path, option: str, message: str
) -> None:
    done = cli(option, "what is 2+2", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert error_line(done.stderr) == message
    assert not (tmp_path / "ferry.db").exists()


def test_ask_still_asks_a_question_of_one_word(cli: Ferry, tmp_path: Path) -> None:
    done = succeeded(
        cli("ask", "logs", env=ferry_env(tmp_path, FERRY_MODEL="offline"), cwd=tmp_path)
    )

    assert done.stdout.strip()
    assert len(stored_threads(cli, tmp_path)) == 1
    assert new_thread_id(done.stderr)


@pytest.mark.parametrize("first", ["What is 150 * 3?", "2+2", "--thread=t1"])
def test_questions_and_ask_options_alone_still_mean_ask(
    cli: Ferry, tmp_path: Path, first: str
) -> None:
    args = (first, "What is 150 * 3?") if first.startswith("-") else (first,)
    done = succeeded(cli(*args, env=ferry_env(tmp_path, FERRY_MODEL="offline"), cwd=tmp_path))

    assert done.stdout.strip()

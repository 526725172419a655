"""The README and the docs as a newcomer follows them: every `ferry` command line they show is
one the parser takes, every Python example runs offline as written, and the README fits on a
page (`make test` also builds the site with `mkdocs build --strict`)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.cli.parser import build_parser, with_ask
from tests.support.cli_helpers import ferry_env
from tests.support.servers.openmeteo import OpenMeteoServer

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
NOT_RUN = "<!-- not run:"
_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)\n```", re.DOTALL)
# The docs' placeholders, as a reader would fill them in.
_PLACEHOLDERS = {"ID": "t1", "NEW": "t2", "CHECKPOINT": "cp1", "REASON": "no", "FILE": "a.db"}


def blocks(page: Path, lang: str) -> Iterator[tuple[str, str]]:
    """The page's code blocks in `lang`: (the line before, the code)."""
    for match in _BLOCK.finditer("\n" + page.read_text()):
        if match.group("lang") == lang:
            yield match.group("before"), match.group("body")


def command_lines() -> Iterator[tuple[str, str]]:
    """Every `ferry` command line of a shell block, with the page it is on."""
    for page in PAGES:
        for _, body in blocks(page, "sh"):
            for line in body.splitlines():
                command = re.split(r"\|\s*(?=(?:\.venv/bin/)?ferry\b)", line)[-1]
                if re.match(r"\s*(?:\.venv/bin/)?ferry\b", command):
                    yield page.relative_to(REPO).as_posix(), command.strip()


def _as_typed(line: str) -> list[str]:
    """The arguments a reader types for a documented line: comments dropped, the first of
    each `a | b` choice, optional `[…]` parts in, placeholders filled."""
    words = shlex.split(line, comments=True)[1:]
    typed: list[str] = []
    skipping = False
    for word in words:
        if word == "|":
            skipping = True  # the documented alternatives after the first
            continue
        if skipping:
            skipping = not word.endswith("]")  # a choice in brackets ends with them
            continue
        word = word.strip("[]").rstrip("…")
        if word:
            typed.append(_PLACEHOLDERS.get(word, word))
    return typed


COMMANDS = sorted(set(command_lines()))


def test_the_docs_show_the_commands() -> None:
    assert len(COMMANDS) >= 40  # the README's block alone has 16


@pytest.mark.parametrize(("page", "line"), COMMANDS)
def test_every_command_line_in_the_docs_is_one_ferry_takes(page: str, line: str) -> None:
    parser = build_parser()
    argv = _as_typed(line) or ["ask"]  # `… | ferry`: the piped text is the question
    try:
        parser.parse_args(with_ask(parser, argv))
    except SystemExit as exc:
        pytest.fail(f"{page}: `{line}` is refused by ferry's parser (exit {exc.code})")


RUNNABLE = [
    page
    for page in PAGES
    if any(not before.startswith(NOT_RUN) for before, _ in blocks(page, "python"))
]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_python_example_runs_offline_as_written(page: Path, tmp_path: Path) -> None:
    """A page's examples, in order, in one new process (a later one may use an earlier one's
    names), with no key: the offline model, a fresh database, and a local weather service."""
    code = "\n\n".join(
        body for before, body in blocks(page, "python") if not before.startswith(NOT_RUN)
    )
    with OpenMeteoServer() as weather:
        env = ferry_env(tmp_path, weather=weather, FERRY_MODEL="offline", PYTHONPATH=str(REPO))
        env.pop("OPENAI_API_KEY", None)
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), f"{page.name}: printed nothing"
    assert "offline planner, not a language model" not in done.stdout  # each was understood


def test_the_readme_fits_on_a_page() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200

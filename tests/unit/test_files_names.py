r"""File names that are not UTF-8: listed escaped (`\xff`), read back by that name, run intact.

Linux lets a name hold any bytes but `/` and NUL; Python hands such a name over with lone
surrogates in it, which no model API, JSON encoder or checkpoint accepts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tools.files import read_file


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with a file and a folder whose names are Latin-1 bytes, beside ordinary ones."""
    root = tmp_path / "root"
    root.mkdir()
    base = os.fsencode(root)
    with open(base + b"/\xff\xfe.txt", "wb") as odd:
        odd.write(b"read by its bytes\n")
    os.mkdir(base + b"/d\xe9j\xe0")
    with open(base + b"/d\xe9j\xe0/inside.txt", "wb") as inside:
        inside.write(b"inside\n")
    (root / "notes.txt").write_text("notes\n")
    (root / "\\xff.txt").write_text("a name with a backslash, in UTF-8\n")
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root))
    return root


def test_a_listing_shows_such_names_escaped_and_the_rest_intact(root: Path) -> None:
    reply = read_file.invoke({"path": "."})
    reply.encode("utf-8")  # no lone surrogates: any model API and checkpoint takes it
    header, *entries = reply.splitlines()
    assert header.startswith("./: a directory with 4 visible entries")
    assert "not UTF-8" in header
    assert sorted(entries) == sorted(["\\xff\\xfe.txt", "d\\xe9j\\xe0/", "notes.txt", "\\xff.txt"])


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("\\xff\\xfe.txt", "\\xff\\xfe.txt: lines 1-1 of 1\nread by its bytes"),
        ("\\xFF\\xFE.txt", "\\xff\\xfe.txt: lines 1-1 of 1\nread by its bytes"),
        ("d\\xe9j\\xe0/inside.txt", "d\\xe9j\\xe0/inside.txt: lines 1-1 of 1\ninside"),
        ("\\xff.txt", "\\xff.txt: lines 1-1 of 1\na name with a backslash, in UTF-8"),
    ],
)
def test_the_name_shown_reads_the_file(root: Path, path: str, expected: str) -> None:
    assert read_file.invoke({"path": path}) == expected


def test_a_folder_so_named_lists_under_its_escaped_name(root: Path) -> None:
    assert read_file.invoke({"path": "d\\xe9j\\xe0"}).splitlines() == [
        "d\\xe9j\\xe0/: a directory with 1 visible entry; folders end in /.",
        "inside.txt",
    ]


def test_a_run_that_lists_such_a_folder_goes_on(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real OpenAI client sends the listing to the model (a loopback one) and stores it."""
    db = tmp_path / "ferry.db"
    config = {"configurable": {"thread_id": "t"}}
    with OpenAIServer() as openai:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.url + "/v1")
        openai.script(
            [openai_tool_calls(("read_file", {"path": "."})), openai_answer("listed"),
             openai_answer("still here")]
        )  # fmt: skip
        settings = Settings(db=db, files_root=root, model="openai:gpt-4.1-mini")
        graph = build_graph(tools=[read_file], checkpointer=sqlite_saver(db), settings=settings)
        graph.invoke({"messages": [("user", "what files are there?")]}, config)
        graph.invoke({"messages": [("user", "and now?")]}, config)
        openai.assert_complete()
        sent = json.dumps(openai.chat_requests()[1]["messages"])
    assert "\\\\xff\\\\xfe.txt" in sent  # the model saw the name as shown
    reader = build_graph(tools=[read_file], checkpointer=sqlite_saver(db), settings=settings)
    stored = reader.get_state(config).values["messages"]
    [listing] = [m for m in stored if isinstance(m, ToolMessage)]
    assert listing.status == "success" and "\\xff\\xfe.txt" in listing.text
    assert stored[-1].content == "still here"

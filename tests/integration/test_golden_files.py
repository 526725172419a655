"""Files written by earlier releases open, read identically, continue and resume.

Each `tests/support/golden/files/ferry-<commit>.db` was written by that release
(tests/support/golden/make_files.py) and is never regenerated: it stands for the files users
already have. Its manifest records what the release read back from it. Every test works on a
copy under tmp_path, through public entry points only (`build_graph`, `sqlite_saver`, the
`ferry` command), and leaves the committed file as its manifest's sha256 says.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.types import Command

from graph import build_graph
from graph.storage import sqlite_saver
from tests.support.golden import readback, recipe
from tests.support.scripted import ScriptedModel

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "tests" / "support" / "golden" / "files"
MANIFESTS = sorted(FILES.glob("ferry-*.json"))


@dataclass
class Golden:
    """A copy of one golden file, and what its release read back from it."""

    manifest: dict[str, Any]
    db: Path

    def stored(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's messages as the release read them."""
        return list(self.manifest["threads"][thread_id]["state"]["values"]["messages"])


@pytest.fixture(params=MANIFESTS, ids=[m.stem for m in MANIFESTS])
def golden(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Golden]:
    manifest = json.loads(request.param.read_text(encoding="utf-8"))
    committed = FILES / manifest["file"]
    assert _sha256(committed) == manifest["sha256"], f"{committed.name} is not as committed"
    copy = tmp_path / "ferry.db"
    shutil.copyfile(committed, copy)  # the bytes only: the copy is writable whatever the file is
    monkeypatch.setenv("FERRY_APPROVE_TOOLS", recipe.APPROVE_TOOLS)
    recipe.ARCHIVED.clear()
    recipe.INVOICES.clear()
    yield Golden(manifest, copy)
    assert _sha256(committed) == manifest["sha256"], f"{committed.name} was changed by the test"
    assert not list(FILES.glob("*-wal")) and not list(FILES.glob("*-shm"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _agent(db: Path, model: ScriptedModel | None = None) -> Any:
    """Today's graph on the file, with the golden threads' tools (model None: offline)."""
    return build_graph(model=model, tools=recipe.TOOLS, checkpointer=sqlite_saver(db))


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _shape(record: dict[str, Any]) -> dict[str, Any]:
    """A message without its id, and a tool result's timing: what a new one is compared on."""
    kept = {k: v for k, v in record.items() if k != "id"}
    kept["response_metadata"] = {
        k: v for k, v in record.get("response_metadata", {}).items() if k != "duration_ms"
    }
    return kept


def _assert_sent_whole_history(sent: list[BaseMessage], stored: list[dict[str, Any]]) -> None:
    """The model's prompt holds every stored message, in order (tool results fenced as data)."""
    conversation = [m for m in sent if m.type != "system"]
    assert [(m.type, m.id) for m in conversation[: len(stored)]] == [
        (s["type"], s["id"]) for s in stored
    ]
    for message, record in zip(conversation, stored, strict=False):
        if message.type == "tool":
            assert message.tool_call_id == record["tool_call_id"]
            assert str(record["content"]) in str(message.content)
        else:
            assert message.content == record["content"]
        if message.type == "ai":
            assert readback.message(message)["tool_calls"] == record["tool_calls"]


# --- reads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("thread_id", recipe.THREADS)
def test_a_thread_reads_as_its_release_read_it(golden: Golden, thread_id: str) -> None:
    """Its values, next nodes, tasks, interrupts, metadata and every checkpoint of its history."""
    expected = golden.manifest["threads"][thread_id]
    read = readback.thread(_agent(golden.db), thread_id)
    assert read["state"]["values"] == expected["state"]["values"]
    assert {k: v for k, v in read["state"].items() if k != "values"} == {
        k: v for k, v in expected["state"].items() if k != "values"
    }
    assert len(read["history"]) == len(expected["history"])
    assert read["history"] == expected["history"]


ADDED_TO_HISTORY = {"thread_usage"}
"""Keys `ferry history --json` gained since the golden files' releases: the format grows by
keys; what a release showed, it shows the same."""


def as_released(shown: dict[str, Any]) -> dict[str, Any]:
    """The CLI's listing without what was added since (each added key checked to be there)."""
    history = {}
    for thread_id, report in shown["ferry_history"].items():
        assert ADDED_TO_HISTORY <= set(report), report.keys()
        history[thread_id] = {k: v for k, v in report.items() if k not in ADDED_TO_HISTORY}
    return {**shown, "ferry_history": history}


def test_the_cli_lists_and_shows_what_the_release_did(golden: Golden) -> None:
    """`ferry threads --json` (ids, titles, counts, times) and `ferry history --json`."""
    shown = as_released(readback.listing(golden.db, recipe.THREADS, pythonpath=str(REPO)))
    assert shown["ferry_threads"] == golden.manifest["ferry_threads"]
    assert shown["ferry_history"] == golden.manifest["ferry_history"]


def test_a_read_only_copy_reads_the_same(golden: Golden) -> None:
    golden.db.chmod(0o444)
    for thread_id in recipe.THREADS:
        read = readback.thread(_agent(golden.db), thread_id)
        assert read == golden.manifest["threads"][thread_id]
    shown = as_released(readback.listing(golden.db, recipe.THREADS, pythonpath=str(REPO)))
    assert shown == {k: golden.manifest[k] for k in ("ferry_threads", "ferry_history")}


def test_the_stored_threads_are_the_ones_made() -> None:
    """Each file holds what it stands for (as its release read it), so the tests above mean it."""
    for path in MANIFESTS:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        threads = manifest["threads"]
        short = [m["type"] for m in threads[recipe.SHORT]["state"]["values"]["messages"]]
        assert short == ["human", "ai", "tool", "ai"]
        assert manifest["rows"]["ferry_parts"] >= 2  # the long thread is stored in parts
        assert threads[recipe.APPROVAL]["state"]["next"] == ["check"]
        assert threads[recipe.APPROVAL]["state"]["interrupts"]
        assert threads[recipe.KILLED]["state"]["next"] == ["execute_tool"]
        assert manifest["rows"]["ferry_started_calls"] == 1
        assert (FILES / manifest["file"]).stat().st_size == manifest["bytes"]


# --- continuing and resuming -----------------------------------------------------------------


def _turn(n: int, word: str) -> tuple[str, list[Any]]:
    calls = (f"new-{n}-c1", "look_up", {"word": word})
    return f"Again, what is a {word}?", [
        recipe.reply(f"new-{n}-a1", "", calls),
        recipe.reply(f"new-{n}-a2", f"Still: {recipe.GLOSSARY[word]}."),
    ]


def _expected_turn(n: int, word: str) -> list[dict[str, Any]]:
    question, (call, answer) = _turn(n, word)
    tool = {
        "type": "tool",
        "name": "look_up",
        "content": f"{word}: {recipe.GLOSSARY[word]}",
        "tool_call_id": f"new-{n}-c1",
        "status": "success",
        "artifact": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    human = {
        "type": "human",
        "name": None,
        "content": question,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    return [human, _shape(readback.message(call)), tool, _shape(readback.message(answer))]


@pytest.mark.parametrize(("thread_id", "turns"), [(recipe.SHORT, 1), (recipe.LONG, 9)])
def test_a_finished_thread_continues_with_a_new_turn(
    golden: Golden, thread_id: str, turns: int
) -> None:
    """A new turn's model sees the whole thread; the long one grows past its next part."""
    stored = golden.stored(thread_id)
    words = ["hull", "keel", "jetty"]
    expected_new: list[dict[str, Any]] = []
    for n in range(turns):
        question, replies = _turn(n, words[n % len(words)])
        model = ScriptedModel(replies)
        result = _agent(golden.db, model).invoke(
            {"messages": [("user", question)]}, _config(thread_id)
        )
        model.assert_complete()
        if n == 0:
            _assert_sent_whole_history(model.calls[0], stored)
            assert model.calls[0][-1].content == question
        assert result["stop_reason"] == "answered"
        expected_new += _expected_turn(n, words[n % len(words)])
    read = readback.thread(_agent(golden.db), thread_id)  # a new saver: from the file alone
    messages = read["state"]["values"]["messages"]
    assert messages[: len(stored)] == stored
    assert [_shape(m) for m in messages[len(stored) :]] == expected_new
    old_history = golden.manifest["threads"][thread_id]["history"]
    assert read["history"][-len(old_history) :] == old_history


def test_the_thread_awaiting_approval_resumes_approved(golden: Golden) -> None:
    """Approved, the held call runs once and the model answers from its result."""
    stored = golden.stored(recipe.APPROVAL)
    (interrupt,) = golden.manifest["threads"][recipe.APPROVAL]["state"]["interrupts"]
    assert [r["name"] for r in interrupt["value"]["action_requests"]] == ["archive_note"]
    model = ScriptedModel([recipe.reply("approval-a2", "Archived your note.")])
    result = _agent(golden.db, model).invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), _config(recipe.APPROVAL)
    )
    model.assert_complete()
    assert recipe.ARCHIVED == ["the jetty needs paint"]  # ran once
    assert result["stop_reason"] == "answered"
    messages = readback.thread(_agent(golden.db), recipe.APPROVAL)["state"]["values"]["messages"]
    _assert_sent_whole_history(model.calls[0], messages[: len(stored) + 1])
    assert messages[: len(stored)] == stored
    (result_record, answer) = messages[len(stored) :]
    assert (result_record["type"], result_record["tool_call_id"], result_record["status"]) == (
        "tool",
        "approval-c1",
        "success",
    )
    assert result_record["content"] == "archived: the jetty needs paint"
    assert (answer["type"], answer["content"], answer["tool_calls"]) == (
        "ai",
        "Archived your note.",
        [],
    )
    assert readback.thread(_agent(golden.db), recipe.APPROVAL)["state"]["interrupts"] == []


def test_the_killed_thread_resumes_without_running_the_call_again(golden: Golden) -> None:
    """A call with side effects that started and never finished is answered, not re-run."""
    stored = golden.stored(recipe.KILLED)
    model = ScriptedModel([recipe.reply("killed-a2", "I could not confirm the invoice.")])
    result = _agent(golden.db, model).invoke(None, _config(recipe.KILLED))
    model.assert_complete()
    assert recipe.INVOICES == []  # never sent a second time
    assert result["stop_reason"] == "answered"
    messages = readback.thread(_agent(golden.db), recipe.KILLED)["state"]["values"]["messages"]
    assert messages[: len(stored)] == stored
    (result_record, answer) = messages[len(stored) :]
    assert (result_record["type"], result_record["tool_call_id"], result_record["status"]) == (
        "tool",
        "killed-c1",
        "error",
    )
    assert "send_invoice" in result_record["content"]
    assert "not re-run automatically" in result_record["content"]
    assert answer["content"] == "I could not confirm the invoice."
    _assert_sent_whole_history(model.calls[0], messages[: len(stored) + 1])


@pytest.mark.parametrize(
    ("thread_id", "call_id"), [(recipe.APPROVAL, "approval-c1"), (recipe.KILLED, "killed-c1")]
)
def test_a_new_question_answers_the_unfinished_call_in_place(
    golden: Golden, thread_id: str, call_id: str
) -> None:
    """The user moves on: the call waiting (or cut short) is answered, never run, in its place."""
    stored = golden.stored(thread_id)
    model = ScriptedModel([recipe.reply(f"{thread_id}-a2", "It is noon.")])
    result = _agent(golden.db, model).invoke(
        {"messages": [("user", "Never mind. What time is it?")]}, _config(thread_id)
    )
    model.assert_complete()
    assert (recipe.ARCHIVED, recipe.INVOICES) == ([], [])
    assert result["stop_reason"] == "answered"
    messages = readback.thread(_agent(golden.db), thread_id)["state"]["values"]["messages"]
    assert messages[: len(stored)] == stored
    answered, question, answer = messages[len(stored) :]
    assert (answered["type"], answered["tool_call_id"], answered["status"]) == (
        "tool",
        call_id,
        "error",
    )
    assert answered["content"].startswith("No result:")
    if thread_id == recipe.KILLED:  # it may have sent the invoice: never "call it again"
        assert "send_invoice declares side effects" in answered["content"]
        assert "Check whether it did before calling it again" in answered["content"]
    assert (question["content"], answer["content"]) == (
        "Never mind. What time is it?",
        "It is noon.",
    )
    _assert_sent_whole_history(model.calls[0], [*stored, answered, question])

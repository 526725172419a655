"""Both providers accept the bounded prompt: old turns left out whole, with the note saying so
(`FERRY_COMPACTION=drop`) or a summary of them (`summary`, written here by the offline model).

Each emulator answers HTTP 400 to what its real API rejects (a result without its call, a call
without its result), so a prompt that split a call from its result would fail here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from graph import build_graph
from graph.core.settings import Settings
from graph.prompt import OMITTED
from graph.storage import sqlite_saver
from tests.support.providers import PROVIDERS, Provider
from tests.support.servers.scripted import ScriptedServer
from tests.support.turns import ask

TURNS = 12


@tool
def fetch_page(n: int) -> str:
    """Fetch one page of a long record.

    Args:
        n: the page number.
    """
    return f"page {n}: " + "lorem ipsum " * 200


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


@pytest.fixture
def emulator(provider: Provider) -> Iterator[ScriptedServer]:
    with provider.server() as running:
        yield running
    assert running.rejections == [], running.rejections


def make(provider: Provider, emulator: ScriptedServer, db: Path, **settings: Any) -> Any:
    return build_graph(
        model=provider.model(emulator),
        tools=[fetch_page],
        checkpointer=sqlite_saver(db),
        settings=Settings(**settings),
    )


@pytest.mark.parametrize("compaction", ["drop", "summary"])
def test_old_turns_are_left_out_whole_and_the_provider_accepts_the_prompt(
    provider: Provider, emulator: ScriptedServer, tmp_path: Path, compaction: str
) -> None:
    steps: list[Any] = []
    for i in range(TURNS):
        steps += [provider.tool_calls(("fetch_page", {"n": i})), provider.answer(f"page {i} read")]
    emulator.script(steps)
    graph = make(
        provider,
        emulator,
        tmp_path / "db",
        context_tokens=2_000,
        compaction=compaction,
        summary_model="offline",
    )
    for i in range(TURNS):
        ask(graph, f"question {i}")
    emulator.assert_complete()

    stored = graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    assert len(stored) == 4 * TURNS  # the stored history stays whole
    last = provider.transcript(provider.requests(emulator)[-1])
    assert [item.kind for item in last[:2]] == ["user", "user"]
    assert last[0].text == "question 0"
    if compaction == "drop":
        assert last[1].text == OMITTED
    else:
        assert last[1].text.startswith("[Ferry: earlier turns of this conversation are left out")
        assert "- the user said: question 1\n- the user said: question 2" in last[1].text
    assert [item.kind for item in last[2:]][-3:] == ["user", "tool_use", "tool_result"]
    assert last[-3].text == f"question {TURNS - 1}"  # the latest turn, whole
    assert len(last) < 4 * TURNS // 2

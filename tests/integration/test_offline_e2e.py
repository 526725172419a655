"""The offline model drives the real tools end to end (weather from the loopback server)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from graph import build_graph
from graph.guards import turn_counters
from graph.storage import sqlite_saver
from tests.support.servers.openmeteo import OpenMeteoServer
from tests.support.turns import ask


@pytest.fixture
def weather(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenMeteoServer]:
    with OpenMeteoServer() as server:
        server.temperatures["Madrid"] = 21.5
        server.temperatures["Bogotá"] = 14.2
        monkeypatch.setenv("FERRY_GEOCODING_URL", server.url + "/v1")
        monkeypatch.setenv("FERRY_FORECAST_URL", server.url + "/v1")
        monkeypatch.setenv("FERRY_MODEL", "offline")
        yield server


def test_three_intents_become_three_parallel_calls(
    weather: OpenMeteoServer, tmp_path: Path
) -> None:
    graph = build_graph(checkpointer=sqlite_saver(tmp_path / "e2e.db"))
    result = ask(graph, "What day is it, how much is 150 * 3, and what's the weather in Bogotá?")
    plan = result["messages"][1]
    assert isinstance(plan, AIMessage)
    assert sorted(c["name"] for c in plan.tool_calls) == [
        "calculator",
        "get_datetime",
        "get_weather",
    ]
    assert all(m.status == "success" for m in result["messages"] if isinstance(m, ToolMessage))
    answer = result["messages"][-1].content
    assert "450" in answer and "14.2 °C" in answer and "Bogotá" in answer
    assert turn_counters(result["messages"])["model_calls"] == 2


def test_temperature_times_three_is_a_dependent_call(
    weather: OpenMeteoServer, tmp_path: Path
) -> None:
    graph = build_graph(checkpointer=sqlite_saver(tmp_path / "e2e.db"))
    result = ask(graph, "Get the temperature in Madrid and multiply it by 3")
    calls = [c for m in result["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == ["get_weather", "calculator"]
    assert calls[1]["args"] == {"expression": "21.5 * 3"}
    assert "64.5" in result["messages"][-1].content
    assert turn_counters(result["messages"])["model_calls"] == 3


def test_unknown_city_is_reported_and_the_run_continues(
    weather: OpenMeteoServer, tmp_path: Path
) -> None:
    graph = build_graph(checkpointer=sqlite_saver(tmp_path / "e2e.db"))
    result = ask(graph, "What's the weather in Atlantis?")
    assert "City 'Atlantis' not found" in result["messages"][-1].content
    assert result["stop_reason"] == "answered"


def test_offline_model_says_what_it_is_outside_its_reach(
    weather: OpenMeteoServer, tmp_path: Path
) -> None:
    graph = build_graph(checkpointer=sqlite_saver(tmp_path / "e2e.db"))
    result = ask(graph, "Write me a sonnet about ferries")
    assert "offline planner, not a language model" in result["messages"][-1].content


def test_chat_takes_turns_on_one_thread(weather: OpenMeteoServer, tmp_path: Path) -> None:
    turns = "What is 150 * 3?\nand divided by 9?\nexit\n"
    done = subprocess.run(
        [sys.executable, "-m", "graph.cli", "chat"],
        cwd=tmp_path, input=turns, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("you> ") == 3 and "you> " not in done.stdout  # answers alone
    assert "`150 * 3` = 450" in done.stdout and "`450 / 9` = 50" in done.stdout

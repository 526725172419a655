"""The HTTP tools use the services, timeouts and caps of the settings the graph was built with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.core.settings import Settings
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.servers.base import Reply
from tests.support.servers.openmeteo import OpenMeteoServer
from tests.support.servers.tavily import FAKE_KEY, TavilyServer
from tests.support.turns import ask
from tools.weather import get_weather
from tools.web_search import web_search


@pytest.fixture
def openmeteo() -> Iterator[OpenMeteoServer]:
    server = OpenMeteoServer()
    with server:
        yield server


@pytest.fixture
def tavily(monkeypatch: pytest.MonkeyPatch) -> Iterator[TavilyServer]:
    monkeypatch.setenv("TAVILY_API_KEY", FAKE_KEY)  # a secret: from the environment, never settings
    server = TavilyServer()
    with server:
        yield server


def tool_reply(
    tmp_path: Path, tool: BaseTool, args: dict[str, Any], **settings: Any
) -> ToolMessage:
    """Run one call of `tool` through a graph built with `settings`; return its result."""
    model = ScriptedModel([tool_call(tool.name, **args), answer("done")])
    graph = build_graph(
        model=model,
        tools=[tool],
        settings=Settings(db=tmp_path / "ferry.db", **settings),
        checkpointer=InMemorySaver(),
    )
    [reply] = [m for m in ask(graph, "go")["messages"] if isinstance(m, ToolMessage)]
    model.assert_complete()
    return reply


def test_weather_asks_the_services_of_the_settings(
    tmp_path: Path, openmeteo: OpenMeteoServer
) -> None:
    # The environment still points at a closed port (conftest): only the settings lead here.
    reply = tool_reply(
        tmp_path,
        get_weather,
        {"city": "Madrid"},
        geocoding_url=openmeteo.url + "/v1",
        forecast_url=openmeteo.url + "/v1",
    )
    assert reply.status == "success"
    assert str(reply.content).startswith("Madrid, Community of Madrid, Spain: ")
    assert len(openmeteo.requests_to("/v1/search")) == 1
    assert len(openmeteo.requests_to("/v1/forecast")) == 1


def test_weather_retries_within_the_budget_of_the_settings(
    tmp_path: Path, openmeteo: OpenMeteoServer
) -> None:
    openmeteo.fail_next(Reply(503, "Unavailable"), times=9)
    reply = tool_reply(
        tmp_path,
        get_weather,
        {"city": "Madrid"},
        geocoding_url=openmeteo.url + "/v1",
        http_retry_total_s=0,  # the environment's budget (20 s) would allow four attempts
    )
    assert reply.status == "error"
    assert "after 1 attempt;" in str(reply.content)
    assert len(openmeteo.requests_to("/v1/search")) == 1


def test_search_asks_the_tavily_of_the_settings_and_caps_its_reply(
    tmp_path: Path, tavily: TavilyServer
) -> None:
    reply = tool_reply(
        tmp_path, web_search, {"query": "ferries"}, tavily_url=tavily.url, search_max_chars=300
    )
    assert reply.status == "success"
    assert str(reply.content).startswith("Answer: A short answer from the loopback Tavily.")
    assert len(str(reply.content)) <= 300
    assert "[truncated to 300 characters" in str(reply.content)
    assert len(tavily.requests_to("/search")) == 1

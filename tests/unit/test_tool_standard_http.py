"""langchain-tests' standard checks, and parameter descriptions, for the HTTP-backed tools."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import BaseModel

from tools.weather import get_weather
from tools.web_search import web_search


class TestGetWeatherStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return get_weather

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Bogotá", "units": "fahrenheit"}


class TestWebSearchStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return web_search

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": "ferry timetables Bilbao", "max_results": 3}


@pytest.mark.parametrize("tool", [get_weather, web_search], ids=lambda t: t.name)
def test_every_parameter_is_described_for_the_model(tool: BaseTool) -> None:
    model = tool.args_schema
    assert isinstance(model, type) and issubclass(model, BaseModel)
    schema = model.model_json_schema()
    assert schema["description"]
    for name, parameter in schema["properties"].items():
        assert parameter.get("description"), f"{tool.name}.{name} has no description"


def test_names_and_arguments_match_the_design() -> None:
    assert get_weather.name == "get_weather"
    assert set(get_weather.args) == {"city", "units"}
    assert get_weather.args["units"]["enum"] == ["celsius", "fahrenheit"]
    assert get_weather.args["units"]["default"] == "celsius"
    assert web_search.name == "web_search"
    assert set(web_search.args) == {"query", "max_results"}
    assert web_search.args["max_results"]["default"] == 5

"""langchain-tests' standard checks for the local tools, and described parameters for each."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import BaseModel

from tools.calculator import calculator
from tools.clock import get_datetime
from tools.files import read_file


class TestCalculatorStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return calculator

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"expression": "150 * 3"}


class TestReadFileStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return read_file

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"path": "notes.txt", "start_line": 1, "max_lines": 50}


class TestGetDatetimeStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return get_datetime

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"timezone": "Europe/Madrid"}


@pytest.mark.parametrize(
    ("tool", "parameters"),
    [
        (calculator, {"expression"}),
        (read_file, {"path", "start_line", "max_lines"}),
        (get_datetime, {"timezone"}),
    ],
    ids=lambda value: getattr(value, "name", ""),
)
def test_every_parameter_is_described(tool: BaseTool, parameters: set[str]) -> None:
    assert isinstance(tool.args_schema, type)
    assert issubclass(tool.args_schema, BaseModel)
    schema = tool.args_schema.model_json_schema()
    assert set(schema["properties"]) == parameters
    for name, spec in schema["properties"].items():
        assert spec.get("description", "").strip(), f"{tool.name}.{name} has no description"
    assert tool.description.strip()
    assert "Args:" not in tool.description  # parse_docstring moved them into the schema

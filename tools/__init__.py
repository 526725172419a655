"""The tool registry: the one list both `bind_tools` and the execute node use."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from tools.calculator import calculator
from tools.clock import get_datetime
from tools.files import read_file
from tools.weather import get_weather
from tools.web_search import web_search

TOOLS: list[BaseTool] = [web_search, get_weather, calculator, read_file, get_datetime]

__all__ = ["TOOLS", "calculator", "get_datetime", "get_weather", "read_file", "web_search"]

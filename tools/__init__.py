"""The tool registry: the one list both `bind_tools` and the execute node use.

The tools (and LangChain's tool classes) load when one of these names is first read, so what
imports only `tools.settings` (every `ferry` command) does not pay for them.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from tools.calculator import calculator
    from tools.clock import get_datetime
    from tools.files import read_file
    from tools.weather import get_weather
    from tools.web_search import web_search

    TOOLS: list[BaseTool]

__all__ = ["TOOLS", "calculator", "get_datetime", "get_weather", "read_file", "web_search"]


def __getattr__(name: str) -> Any:
    """Load the registry the first time one of its names is read."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tools.calculator import calculator
    from tools.clock import get_datetime
    from tools.files import read_file
    from tools.weather import get_weather
    from tools.web_search import web_search

    registry = {
        "calculator": calculator,
        "get_datetime": get_datetime,
        "read_file": read_file,
        "get_weather": get_weather,
        "web_search": web_search,
        "TOOLS": [web_search, get_weather, calculator, read_file, get_datetime],
    }
    for key, value in registry.items():  # the first thread to load wins: one `TOOLS` list
        globals().setdefault(key, value)
    return globals()[name]


class _Registry(ModuleType):
    """This package, whose exported names stay the tools' whatever is imported first."""

    def __setattr__(self, name: str, value: Any) -> None:
        # Importing `tools.calculator` binds the submodule as `tools.calculator`; the name is
        # the tool's (it always was), so `from tools import calculator` must not find the module.
        if name in __all__ and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Registry

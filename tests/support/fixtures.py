"""The types of the factory fixtures in tests/conftest.py, for test signatures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.scripted import ScriptedModel

Scripted = Callable[..., ScriptedModel]
"""`scripted(steps)`: a ScriptedModel that must play every step by the test's end."""

Agent = Callable[..., Any]
"""`make_agent(model, checkpointer=None, tools=None, **settings)`: Ferry's compiled graph.

On `agent_tools` unless `tools` names others.
"""

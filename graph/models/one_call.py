"""The model of `ferry tools call`: it asks for one given tool call, then ends the turn.

It lets a person's call run through the whole loop (graph/cli/tool_call.py) as a model's would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field


class AsksForOneCall(BaseChatModel):
    """Replies with one call of `tool` with `args`; once the call is answered, with no text."""

    tool: str
    args: dict[str, Any]
    call_id: str = Field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    result_seen: str | None = None
    """The call's result as the model was sent it (fenced, cut if long), once it was."""

    @property
    def _llm_type(self) -> str:
        return "ferry-one-call"

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> AsksForOneCall:
        return self  # a copy would keep `result_seen` to itself

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Itself: its one call is given, so the tools offered change nothing."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """The call, until a result answers it (the prompt says so); then an empty answer."""
        results = [
            m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == self.call_id
        ]
        if results:
            self.result_seen = results[-1].text
            reply = AIMessage("")
        else:
            call = {"name": self.tool, "args": self.args, "id": self.call_id, "type": "tool_call"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])

"""The fallback model by itself: which failures pass to the next model, the cool-down, and both
the streaming and the plain path (graph.invoke with stream_mode="values" takes the plain one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from graph.models.fallback import FallbackModel


class Down(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class Fake(BaseChatModel):
    """Answers with its name, or raises what it is given; counts its calls."""

    name_: str
    fails: list[Any] = []
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "fake"

    def _answer(self) -> AIMessage:
        self.calls += 1
        if self.fails:
            raise self.fails.pop(0)
        return AIMessage(f"from {self.name_}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer())])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield ChatGenerationChunk(message=AIMessageChunk(content=self._answer().text))


@pytest.mark.parametrize("path", ["invoke", "stream"])
@pytest.mark.parametrize(
    ("failure", "falls_back"),
    [(Down(503), True), (Down(429), True), (ConnectionError("refused"), True), (Down(400), False)],
)
def test_only_an_unavailable_provider_hands_over(
    path: str, failure: Exception, falls_back: bool
) -> None:
    first, second = Fake(name_="a", fails=[failure]), Fake(name_="b")
    model = FallbackModel(specs=["a", "b"], models=[first, second])
    ask = (lambda: model.invoke("hi")) if path == "invoke" else (lambda: _streamed(model))
    if not falls_back:
        with pytest.raises(Down):
            ask()
        assert second.calls == 0
        return
    reply = ask()
    assert reply.text == "from b" and reply.response_metadata["ferry_model"] == "b"
    assert ask().text == "from b"  # a cools down: b is asked first
    assert (first.calls, second.calls) == (1, 2)


def _streamed(model: FallbackModel) -> AIMessage:
    chunks = list(model.stream("hi"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    return AIMessage(merged.text, response_metadata=merged.response_metadata)

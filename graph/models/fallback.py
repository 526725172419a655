"""Fallback: `FERRY_MODEL=openai:gpt-4.1-mini,anthropic:claude-…` — the next model when one is down.

A model is left for the next on what says its provider is unavailable — a connection error, a
timeout, 429 (after the SDK's own retries) or a 5xx — never on another 4xx, which the request
caused and which the next provider would refuse too. A model that failed is skipped for a while
(`COOL_DOWN_S`, the circuit breaker's idea) instead of being tried first on every call; when
every model is cooling down they are tried in order anyway. A reply is never stitched from two
models: once a model streamed part of a reply, its failure is the call's.

Each reply records the model that wrote it (`response_metadata["ferry_model"]`): in the stored
thread, in `--json` (`models`) and in the logs. The history sent to the next model is Ferry's
provider-neutral one, converted by that model's own LangChain integration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM
from pydantic import ConfigDict, Field

log = logging.getLogger("ferry.loop")

COOL_DOWN_S = 60.0
"""How long a model that failed is passed over."""
_UNSTREAMED: RunnableConfig = {"tags": [TAG_NOSTREAM]}
"""A call to one of the models: this run streams the reply; streamed by both, it shows twice."""
SPEC_KEY = "ferry_model"
"""`response_metadata` key naming the model (its spec) that wrote a reply."""


class Health:
    """When each model may be tried first again; shared by every copy of one fallback model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}

    def order(self, specs: Sequence[str]) -> list[int]:
        """The models' positions in the order to try them: the healthy ones first."""
        now = time.monotonic()
        with self._lock:
            cooling = {s for s, until in self._until.items() if until > now}
        return sorted(range(len(specs)), key=lambda i: specs[i] in cooling)

    def failed(self, spec: str) -> None:
        """Pass `spec` over for `COOL_DOWN_S`."""
        with self._lock:
            self._until[spec] = time.monotonic() + COOL_DOWN_S

    def worked(self, spec: str) -> None:
        """`spec` answered: try it in its place again."""
        with self._lock:
            self._until.pop(spec, None)


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the provider is unavailable (try the next), not that the request is bad.

    By the SDKs' shapes: an HTTP status on the error (429 and 5xx: unavailable; other 4xx: the
    request), else a connection error or a timeout.
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status == 429 or status >= 500
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        isinstance(exc, ConnectionError | TimeoutError)
        or names & {"APIConnectionError", "APITimeoutError", "ConnectError", "TimeoutException"}
    )


class FallbackModel(BaseChatModel):
    """Several chat models tried in turn, as one (`FERRY_MODEL` with commas)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    specs: list[str]
    models: list[Any]
    """The chat models, or their tool-bound runnables (`bind_tools`)."""
    health: Health = Field(default_factory=Health)

    @property
    def _llm_type(self) -> str:
        return "ferry-fallback"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FallbackModel:
        """Each model with the tools bound, still tried in turn."""
        bound = [model.bind_tools(tools, **kwargs) for model in self.models]
        return self.model_copy(update={"models": bound})

    def _attempts(self) -> Iterator[tuple[str, Runnable[Any, Any]]]:
        for i in self.health.order(self.specs):
            yield self.specs[i], self.models[i]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last: BaseException | None = None
        for spec, model in self._attempts():
            try:
                reply = model.invoke(messages, _UNSTREAMED, stop=stop, **kwargs)
            except Exception as exc:
                if not unavailable(exc):
                    raise
                last = self._failed(spec, exc)
                continue
            self.health.worked(spec)
            return ChatResult(generations=[ChatGeneration(message=_written_by(reply, spec))])
        assert last is not None
        raise last

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        last: BaseException | None = None
        for spec, model in self._attempts():
            started = False
            try:
                for chunk in model.stream(messages, _UNSTREAMED, stop=stop, **kwargs):
                    started = True
                    # This run's id, and this run streams it (BaseChatModel.stream does both).
                    yield ChatGenerationChunk(message=chunk.model_copy(update={"id": None}))
            except Exception as exc:
                if started or not unavailable(exc):
                    raise
                last = self._failed(spec, exc)
                continue
            self.health.worked(spec)
            yield ChatGenerationChunk(
                message=AIMessageChunk(content="", response_metadata={SPEC_KEY: spec})
            )
            return
        assert last is not None
        raise last

    def _failed(self, spec: str, exc: BaseException) -> BaseException:
        self.health.failed(spec)
        log.warning(
            "model %s unavailable (%s); trying the next model",
            spec,
            type(exc).__name__,
            extra={"event": "model_fallback", "model": spec},
        )
        return exc


def _written_by(reply: AIMessage, spec: str) -> AIMessage:
    return reply.model_copy(
        update={"response_metadata": {**reply.response_metadata, SPEC_KEY: spec}}
    )

"""One model call within the time a run has left, and what a complete reply looks like.

A call the run gives up on runs on in its daemon thread until its request ends, and a provider's
SDK retries a request that timed out or failed (`max_retries`): that retry would reach the
provider after the turn ended, to be paid for and read by no one. Ferry's own models send their
requests through `guarded_http_client`, which refuses any request of a call given up on.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import logging
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs

from graph.core.run import ToolTimeout, run_with_timeout

log = logging.getLogger("ferry.loop")

# Each provider's field that a complete reply always carries, streamed or not.
_END_FIELDS = {"openai": "finish_reason", "anthropic": "stop_reason"}
# Their clients take a per-request `timeout` through the call's keyword arguments.
_TIMEOUT_PACKAGES = ("langchain_openai", "langchain_anthropic")


class ModelTimeout(Exception):
    """The model did not reply in the time the run had left."""


class ReplyCutShort(Exception):
    """The model's reply stopped before its end, again when asked once more."""


def cut_short(reply: AIMessage) -> bool:
    """Whether the provider's stream ended before the reply did (no finish reason).

    A connection closed cleanly mid-stream leaves a well-formed but partial reply: text cut
    mid-sentence, tool arguments that LangChain's partial-JSON parser "repairs" into a cut
    value. Only the final chunk carries the finish reason, so its absence is the sign.
    """
    field = _END_FIELDS.get(str(reply.response_metadata.get("model_provider")))
    return field is not None and not reply.response_metadata.get(field)


class _Abandoned(BaseException):
    """Raised inside an abandoned call; a BaseException so no handler on the way logs it."""


class _Deadline(BaseCallbackHandler):
    """Stops an abandoned streaming call at its next chunk instead of letting it run on."""

    def __init__(self) -> None:
        self.passed = threading.Event()

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        if self.passed.is_set():
            raise _Abandoned

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing; without it LangChain formats every prompt message as text for `on_llm_start`."""


_GIVEN_UP: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "ferry_model_call_given_up", default=None
)
"""Set, in the call's own context, once the run has given up on the call (`invoke_within`)."""


def _refuse_given_up(request: Any) -> None:
    """An HTTP client's request hook: a request of a call the run gave up on is not sent."""
    given_up = _GIVEN_UP.get()
    if given_up is not None and given_up.is_set():
        log.info(
            "a request of a model call given up at the time budget was not sent",
            extra={"event": "model_request_refused", "host": request.url.host},
        )
        raise _Abandoned


@functools.cache
def guarded_http_client(sdk: str, proxy: str | None = None) -> Any:
    """The HTTP client of Ferry's own models on `sdk` (`openai`, `anthropic`): one per process.

    The SDK's own client class and defaults (`DefaultHttpxClient`: its connection limits, its
    redirects, proxies from the environment, or `proxy`), with a hook that sends no request of
    a model call given up on: the SDK's retry of it ends there, unsent.
    """
    module = importlib.import_module(sdk)
    return module.DefaultHttpxClient(proxy=proxy, event_hooks={"request": [_refuse_given_up]})


def _request_options(model: Runnable[Any, Any], seconds: float) -> dict[str, Any]:
    """Per-call keyword arguments that bound each HTTP request to `seconds`, where supported."""
    inner = getattr(model, "bound", model)
    # By its classes, not its own: Ferry's Anthropic model is a subclass of langchain-anthropic's.
    packages = {kind.__module__.split(".")[0] for kind in type(inner).__mro__}
    if not packages & set(_TIMEOUT_PACKAGES):
        return {}
    # The model's own timeout (ChatOpenAI's `request_timeout`, ChatAnthropic's
    # `default_request_timeout`) still holds when it is shorter than the time left.
    own = getattr(inner, "request_timeout", None) or getattr(inner, "default_request_timeout", None)
    if isinstance(own, int | float) and own > 0:
        seconds = min(seconds, float(own))
    return {"timeout": max(seconds, 0.1)}


def invoke_within(
    model: Runnable[Any, Any],
    messages: Sequence[BaseMessage],
    config: RunnableConfig,
    seconds: float,
) -> AIMessage:
    """Ask `model` for a reply, giving up after `seconds` whatever the provider does.

    The request's own timeout is the time left, so a hung server frees the call soon after;
    a reply that keeps streaming (a huge argument, slowly) is stopped at its next chunk, and
    a retry of the request is not sent when the model is one of Ferry's own
    (`guarded_http_client`).

    Raises:
        ModelTimeout: No reply within `seconds`; the call is abandoned.
    """
    deadline = _Deadline()
    bound = model.bind(**_request_options(model, seconds))
    call_config = merge_configs(config, {"callbacks": [deadline]})

    def call() -> AIMessage:
        _GIVEN_UP.set(deadline.passed)  # in the call's own copy of the context
        answer: AIMessage = bound.invoke(messages, call_config)
        return answer

    try:
        reply: AIMessage = run_with_timeout(call, seconds)
    except ToolTimeout as exc:
        deadline.passed.set()
        raise ModelTimeout from exc
    return reply

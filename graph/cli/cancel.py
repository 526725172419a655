"""A cancelled answer's model call stops at its next token, so the reply is never stored.

Ctrl-C in `ferry chat` lets the run end at its step boundary (graph/cli/interrupt.py), but a
model step would otherwise stream on to its end and store the whole reply the person cancelled.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from graph.cli.interrupt import run_cancelled


class AnswerCancelled(BaseException):
    """Raised inside a cancelled run's model call; a BaseException, so no handler logs it."""


class StopCancelledAnswer(BaseCallbackHandler):
    """Ends the model call of a run Ctrl-C cancelled, at its next token or at its end."""

    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        """Stop a streamed reply as soon as its run is cancelled."""
        if run_cancelled():
            raise AnswerCancelled

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Drop a reply that arrived whole (no stream) after its run was cancelled."""
        if run_cancelled():
            raise AnswerCancelled

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing; without it LangChain formats every prompt message as text for `on_llm_start`."""

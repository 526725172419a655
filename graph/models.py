"""Chat models from a `FERRY_MODEL` spec; provider details stay in this module."""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel


class ConfigError(Exception):
    """A setting that cannot work; its message is one line meant for the user."""


_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_EXTRAS = {"anthropic": "langchain_anthropic", "ollama": "langchain_ollama"}


def make_model(spec: str) -> BaseChatModel:
    """Build the chat model named by `spec` (`offline`, `openai:gpt-4.1-mini`, …)."""
    provider, _, name = spec.partition(":")
    if provider == "offline":
        from graph.offline import OfflineModel

        return OfflineModel()
    if provider not in ("openai", "anthropic", "ollama") or not name:
        raise ConfigError(
            f"FERRY_MODEL={spec!r} is not understood; use offline, openai:<model>, "
            "anthropic:<model> or ollama:<model>."
        )
    key = _KEYS.get(provider)
    if key and not os.environ.get(key):
        raise ConfigError(f"FERRY_MODEL={spec} needs {key}; set it, or use FERRY_MODEL=offline.")
    # The SDKs retry 429 and 5xx themselves with backoff, honouring Retry-After.
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model=name, stream_usage=True, max_retries=3, timeout=60)
    try:
        if provider == "anthropic":
            from langchain_anthropic import ChatAnthropic

            model: BaseChatModel = ChatAnthropic(model=name, max_retries=3, timeout=60)
            return model
        from langchain_ollama import ChatOllama

        model = ChatOllama(model=name)
        return model
    except ImportError as exc:
        raise ConfigError(
            f"FERRY_MODEL={spec} needs the {provider} extra: pip install 'ferry-agent[{provider}]'."
        ) from exc

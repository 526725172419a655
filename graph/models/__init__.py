"""Chat models from a `FERRY_MODEL` spec; provider details stay in this module.

Each provider's client reads its own environment variables, as its SDK documents them:
`OPENAI_API_KEY` and `OPENAI_BASE_URL`; `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`;
`OLLAMA_HOST` (no key). Ferry only checks, before any run, that a needed key is set.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from langchain_core.language_models import BaseChatModel

from graph.core.settings import ConfigError

__all__ = ["ConfigError", "make_model"]


# The SDKs retry connection errors, 429 and 5xx themselves, with backoff honouring Retry-After;
# not once the run gave up on the call (graph/models/calls.py).
_MAX_RETRIES = 3
_TIMEOUT_S = 60.0
# A local model may first have to be loaded into memory, which can take minutes.
_OLLAMA_TIMEOUT_S = 300.0


def _openai(name: str) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    from graph.models.calls import guarded_http_client

    return ChatOpenAI(
        model=name,
        stream_usage=True,
        max_retries=_MAX_RETRIES,
        timeout=_TIMEOUT_S,
        http_client=guarded_http_client("openai"),
    )


def _anthropic(name: str) -> BaseChatModel:
    from graph.models.anthropic import CachingChatAnthropic

    return CachingChatAnthropic(  # type: ignore[call-arg]  # mypy misreads the optional `stop` as required
        model_name=name, stream_usage=True, max_retries=_MAX_RETRIES, timeout=_TIMEOUT_S
    )


def _ollama(name: str) -> BaseChatModel:
    from langchain_ollama import ChatOllama

    return ChatOllama(model=name, client_kwargs={"timeout": _OLLAMA_TIMEOUT_S})


_PROVIDERS: dict[str, Callable[[str], BaseChatModel]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "ollama": _ollama,
}
_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_EXTRAS = {"anthropic": "langchain_anthropic", "ollama": "langchain_ollama"}


def make_model(spec: str) -> BaseChatModel:
    """Build the chat model named by `spec` (`offline`, `openai:gpt-4.1-mini`, …).

    A comma-separated list is one model that falls back from each to the next
    (graph/models/fallback.py).

    Raises:
        ConfigError: The spec is not understood, its optional extra is not installed, or its
            API key is not set.
    """
    if "," in spec:  # several: the next when one is unavailable
        specs = [part.strip() for part in spec.split(",") if part.strip()]
        if len(specs) > 1:
            from graph.models.fallback import FallbackModel

            return FallbackModel(specs=specs, models=[make_model(s) for s in specs])
        spec = specs[0] if specs else ""
    provider, _, name = spec.partition(":")
    if provider == "offline":
        from graph.models.offline import OfflineModel

        return OfflineModel()
    build = _PROVIDERS.get(provider)
    if build is None or not name:
        raise ConfigError(
            f"FERRY_MODEL={spec!r} is not understood; use offline, openai:<model>, "
            "anthropic:<model> or ollama:<model>."
        )
    if provider in _EXTRAS:
        _require_extra(spec, provider)
    key = _KEYS.get(provider)
    if key and not os.environ.get(key):
        raise ConfigError(f"FERRY_MODEL={spec} needs {key}; set it, or use FERRY_MODEL=offline.")
    return build(name)


def _require_extra(spec: str, provider: str) -> None:
    """Import the provider's integration, or say which extra installs it."""
    try:
        importlib.import_module(_EXTRAS[provider])
    except ImportError as exc:
        raise ConfigError(
            f"FERRY_MODEL={spec} needs the {provider} extra: pip install 'ferry-agent[{provider}]'."
        ) from exc

"""Shared fixtures: no real keys, no real network, settings only through monkeypatch."""

from __future__ import annotations

from pathlib import Path

import pytest

_SECRETS = ("OPENAI_API_KEY", "TAVILY_API_KEY", "ANTHROPIC_API_KEY", "LANGSMITH_API_KEY")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Remove keys and Ferry settings from the environment, and work in a temporary folder."""
    import os

    for name in list(os.environ):
        if name.startswith("FERRY_") or name.startswith("LANGSMITH_") or name in _SECRETS:
            monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LANGSMITH_GATEWAY", raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FERRY_DB", str(tmp_path / "ferry.db"))
    # Anything that forgets its loopback URL fails fast instead of reaching the internet.
    monkeypatch.setenv("FERRY_TAVILY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FERRY_GEOCODING_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FERRY_FORECAST_URL", "http://127.0.0.1:9")


@pytest.fixture
def fast_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short HTTP timeouts and retry budget, so the tools' fault tests stay quick."""
    monkeypatch.setenv("FERRY_HTTP_TIMEOUT_S", "0.5")
    monkeypatch.setenv("FERRY_HTTP_RETRY_TOTAL_S", "1.5")

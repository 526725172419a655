"""The model factory: every branch of `make_model`, and the CLI's one line when it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI

from graph.models import ConfigError, make_model
from graph.models.offline import OfflineModel
from tests.support.cli_helpers import run_command

_PROVIDER_URLS = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OLLAMA_HOST", "LANGSMITH_GATEWAY")


@pytest.fixture(autouse=True)
def _no_provider_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_URLS:
        monkeypatch.delenv(name, raising=False)


def refused(spec: str) -> str:
    with pytest.raises(ConfigError) as caught:
        make_model(spec)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_offline_needs_nothing() -> None:
    assert isinstance(make_model("offline"), OfflineModel)


@pytest.mark.parametrize("spec", ["gpt-4", "gemini:pro", "openai:", "anthropic:", "ollama:", ""])
def test_a_spec_it_does_not_understand(spec: str) -> None:
    message = refused(spec)
    assert message.startswith(f"FERRY_MODEL={spec!r} is not understood")
    assert "anthropic:<model>" in message and "ollama:<model>" in message


def test_openai_needs_its_key() -> None:
    assert "needs OPENAI_API_KEY" in refused("openai:gpt-4.1-mini")


def test_openai_with_its_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-models")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = make_model("openai:gpt-4.1-mini")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4.1-mini"
    assert str(model.root_client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
    assert (model.max_retries, model.request_timeout, model.stream_usage) == (3, 60.0, True)


def test_anthropic_needs_its_key() -> None:
    assert refused("anthropic:claude-x") == (
        "FERRY_MODEL=anthropic:claude-x needs ANTHROPIC_API_KEY; "
        "set it, or use FERRY_MODEL=offline."
    )


def test_anthropic_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-models")
    model = make_model("anthropic:claude-x")
    assert isinstance(model, ChatAnthropic)
    assert model.model == "claude-x"
    assert model.anthropic_api_key.get_secret_value() == "sk-ant-models"
    assert model.anthropic_api_url == "https://api.anthropic.com"
    assert (model.max_retries, model.default_request_timeout) == (3, 60.0)
    assert model.stream_usage is True


def test_anthropic_honours_its_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-models")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    model = make_model("anthropic:claude-x")
    assert isinstance(model, ChatAnthropic)
    assert model.anthropic_api_url == "http://127.0.0.1:9"
    assert str(model._client.base_url).rstrip("/") == "http://127.0.0.1:9"


@pytest.mark.parametrize("key", [None, "sk-ant-models"])
def test_anthropic_without_its_extra(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    if key:
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    assert refused("anthropic:claude-x") == (
        "FERRY_MODEL=anthropic:claude-x needs the anthropic extra: "
        "pip install 'ferry-agent[anthropic]'."
    )


def test_ollama_needs_no_key() -> None:
    model = make_model("ollama:llama3.2")
    assert isinstance(model, ChatOllama)
    assert model.model == "llama3.2"
    assert str(model._client._client.base_url).rstrip("/") == "http://127.0.0.1:11434"
    assert model._client._client.timeout.read == 300.0


def test_ollama_honours_its_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    model = make_model("ollama:llama3.2")
    assert isinstance(model, ChatOllama)
    assert str(model._client._client.base_url).rstrip("/") == "http://127.0.0.1:9"


def test_ollama_without_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_ollama", None)
    assert refused("ollama:llama3.2") == (
        "FERRY_MODEL=ollama:llama3.2 needs the ollama extra: pip install 'ferry-agent[ollama]'."
    )


def run_cli(tmp_path: Path, *code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FERRY_MODEL": "anthropic:claude-x", "FERRY_DB": str(tmp_path / "db")}
    return run_command([sys.executable, *code], env=env, cwd=tmp_path)


def test_cli_says_the_key_is_missing_in_one_line(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "-m", "graph.cli", "ask", "hi")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "ferry: FERRY_MODEL=anthropic:claude-x needs ANTHROPIC_API_KEY; "
        "set it, or use FERRY_MODEL=offline.\n"
    )


def test_cli_says_the_extra_is_missing_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['langchain_anthropic'] = None; "
        "from graph.cli import main; sys.exit(main(['ask', 'hi']))"
    )
    done = run_cli(tmp_path, "-c", code)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "ferry: FERRY_MODEL=anthropic:claude-x needs the anthropic extra: "
        "pip install 'ferry-agent[anthropic]'.\n"
    )

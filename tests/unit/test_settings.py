"""Settings: the shell wins over .env, defaults follow the key, and the docs list every one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graph.core.settings import ConfigError, Settings, get_settings
from tests.support.trust import trust_folder

REPO = Path(__file__).resolve().parents[2]


def test_shell_wins_over_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=5\nFERRY_TOKEN_BUDGET=777\n")
    trust_folder(tmp_path)  # a folder's .env applies once trusted (tests/unit/test_trust.py)
    monkeypatch.setenv("FERRY_MAX_ITERATIONS", "7")
    monkeypatch.delenv("FERRY_TOKEN_BUDGET", raising=False)
    settings = get_settings()
    assert settings.max_iterations == 7  # from the shell
    assert settings.token_budget == 777  # from .env
    monkeypatch.delenv("FERRY_TOKEN_BUDGET")  # load_dotenv wrote it into os.environ


def test_default_model_follows_the_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().model == "offline"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-settings")
    assert Settings().model == "openai:gpt-4.1-mini"


def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_MAX_ITERATIONS", "0")
    with pytest.raises(ConfigError) as caught:
        get_settings()
    assert str(caught.value) == (
        "FERRY_MAX_ITERATIONS: Input should be greater than or equal to 1 (got '0')"
    )


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented(name: str) -> None:
    """In `.env.example`, and with a docstring the docs' settings reference is made from."""
    variable = f"FERRY_{name.upper()}"
    assert variable in (REPO / ".env.example").read_text()
    assert Settings.model_fields[name].description


def _read_outside_settings() -> set[str]:
    """The `FERRY_` variables the code names that are not settings (secrets, the server's)."""
    named = {
        found
        for package in ("graph", "tools")
        for path in (REPO / package).rglob("*.py")
        for found in re.findall(r"(?<=[\"'`])FERRY_[A-Z][A-Z_]*[A-Z]\b", path.read_text())
    }
    return named - {f"FERRY_{n.upper()}" for n in Settings.model_fields}


@pytest.mark.parametrize("variable", sorted(_read_outside_settings()))
def test_every_variable_outside_the_settings_is_documented(variable: str) -> None:
    assert variable in (REPO / "docs" / "reference" / "settings.md").read_text()

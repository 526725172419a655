"""The trust rule below every entry point: tools standalone, the settings, the servers file."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from graph.core.settings import get_settings, load_dotenv_file
from tests.support.trust import trust_folder
from tools.mcp import config_file
from tools.settings import ToolSettings, secret
from tools.trust import store_path

HOSTILE_ENV = "FERRY_FILES_ROOT={root}\nTAVILY_API_KEY=tvly-from-the-folder-0123\n"


def test_tools_standalone_ignore_an_untrusted_dotenv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".env").write_text(HOSTILE_ENV.format(root=tmp_path / "elsewhere"))

    assert ToolSettings.from_environment().files_root == tmp_path
    assert secret("TAVILY_API_KEY") == ""
    assert capsys.readouterr().err.splitlines() == [
        "ferry: ignored ./.env (not trusted; run 'ferry trust' to use it)"
    ]


def test_tools_standalone_read_a_trusted_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".env").write_text(HOSTILE_ENV.format(root=tmp_path / "elsewhere"))
    trust_folder(tmp_path)
    monkeypatch.setenv("TAVILY_API_KEY", "")  # so the .env's value is undone after the test
    monkeypatch.delenv("TAVILY_API_KEY")

    assert ToolSettings.from_environment().files_root == tmp_path / "elsewhere"
    assert secret("TAVILY_API_KEY") == "tvly-from-the-folder-0123"
    monkeypatch.delenv("FERRY_FILES_ROOT")  # load_dotenv wrote both into os.environ


def test_the_store_is_written_whole_for_the_user_only(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")
    trust_folder(tmp_path)

    store = tmp_path / ".config" / "ferry" / "trusted.json"
    assert store_path() == store
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in store.parent.iterdir()) == ["trusted.json"]  # no temporary
    record = json.loads(store.read_text())["files"][str(tmp_path / ".env")]
    assert json.loads(store.read_text())["version"] == 1
    assert record["sha256"] == hashlib.sha256(b"FERRY_MAX_ITERATIONS=4\n").hexdigest()
    assert datetime.fromisoformat(record["trusted_at"]).tzinfo is not None


def test_the_store_is_in_the_user_s_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert store_path() == tmp_path / "home" / ".config" / "ferry" / "trusted.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")  # invalid by the XDG spec
    assert store_path() == tmp_path / "home" / ".config" / "ferry" / "trusted.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert store_path() == tmp_path / "xdg" / "ferry" / "trusted.json"


def test_the_notice_is_one_line_once_however_often_settings_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')

    for _ in range(5):
        assert get_settings().max_iterations == 10
        ToolSettings.from_environment()
        secret("TAVILY_API_KEY")
        assert config_file() is None

    assert capsys.readouterr().err.splitlines() == [
        "ferry: ignored ./.env and ./mcp.json (not trusted; run 'ferry trust' to use them)"
    ]


def test_a_changed_file_is_named_as_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")
    trust_folder(tmp_path)
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=5\n")
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')

    assert get_settings().max_iterations == 10

    assert capsys.readouterr().err.splitlines() == [
        "ferry: ignored ./.env (changed since trusted) and ./mcp.json (not trusted); "
        "run 'ferry trust' to use them"
    ]


def test_a_symlinked_dotenv_is_judged_by_what_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, other = tmp_path / "shared.env", tmp_path / "other.env"
    target.write_text("FERRY_MAX_ITERATIONS=4\n")
    other.write_text("FERRY_MAX_ITERATIONS=6\n")
    (tmp_path / ".env").symlink_to(target)
    trust_folder(tmp_path)
    assert get_settings().max_iterations == 4
    monkeypatch.delenv("FERRY_MAX_ITERATIONS")  # load_dotenv wrote it into os.environ

    target.write_text("FERRY_MAX_ITERATIONS=5\n")  # the file it points at changed
    assert get_settings().max_iterations == 10
    target.write_text("FERRY_MAX_ITERATIONS=4\n")
    (tmp_path / ".env").unlink()
    (tmp_path / ".env").symlink_to(other)  # the link points elsewhere
    assert get_settings().max_iterations == 10


def test_a_folder_is_trusted_by_its_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")
    (tmp_path / "alias").symlink_to(real)
    trust_folder(tmp_path / "alias")
    monkeypatch.chdir(real)
    assert get_settings().max_iterations == 4
    monkeypatch.delenv("FERRY_MAX_ITERATIONS")


def test_a_corrupt_store_trusts_nothing_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")
    trust_folder(tmp_path)
    store_path().write_text("{half written")

    assert get_settings().max_iterations == 10
    assert get_settings().max_iterations == 10

    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith(f"ferry: {store_path()}: the trust store is not valid JSON (")
    assert first.endswith("; no folder's .env or mcp.json is used")
    assert second == "ferry: ignored ./.env (not trusted; run 'ferry trust' to use it)"


def test_a_dotenv_that_is_not_a_regular_file_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".env")  # reading it would wait forever
    assert get_settings().max_iterations == 10


def test_a_dotenv_elsewhere_is_named_with_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "my project"
    project.mkdir()
    (project / ".env").write_text("FERRY_MAX_ITERATIONS=4\n")

    load_dotenv_file(project / ".env")

    assert capsys.readouterr().err.splitlines() == [
        f"ferry: ignored {project / '.env'} (not trusted; run 'ferry trust' in {project} to use it)"
    ]
